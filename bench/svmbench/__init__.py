"""bench/run in modules: what slurm-vm adds to a job's start and end (bench/README.md)."""
