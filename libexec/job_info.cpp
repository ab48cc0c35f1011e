// slurm-vm-job-info JOBID: the thin adapter through which slurm-vm reads a
// job's AdminComment back from Slurm (lib/slurm/job_record.hpp
// read_admin_comment). It asks slurmctld through Slurm's API
// (slurm_load_job), so no field of the job is parsed out of text (`scontrol
// show job` prints a user's job name raw: a newline in it forged the
// AdminComment line), and prints what it got as
//   {"jobs":[{"job_id":N,"admin_comment":"..." or null,"state":"RUNNING",
//             "requeue":false,"preempt_time":0,"restart_cnt":0}]}
// (state: the base state's name; requeue: Slurm is requeueing the job, or
// holds it pending after a requeue; preempt_time: when its preemption
// started, 0 if it was not preempted) in the shape of `scontrol --json show job`, which Slurm 22.05 lacks (its
// `squeue --json` ignores -j and prints every job). The caller bounds and
// checks the output (admin_comment_of_json, parse_record). Only this file
// links libslurm.
#include <jansson.h>
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

// Slurm 26.05 names a job to slurm_load_job by a step identifier (job id or
// sluid); earlier releases by its job id.
int load_job(job_info_msg_t** msg, uint32_t id) {
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(26, 5, 0)
    slurm_step_id_t step = SLURM_STEP_ID_INITIALIZER;
    step.job_id = id;
    return slurm_load_job(msg, step, SHOW_ALL);
#else
    return slurm_load_job(msg, id, SHOW_ALL);
#endif
}

// The name of a job's base state (slurm.h's job_states), as scontrol says it.
const char* base_state_name(uint32_t state) {
    switch (state & JOB_STATE_BASE) {
    case JOB_PENDING: return "PENDING";
    case JOB_RUNNING: return "RUNNING";
    case JOB_SUSPENDED: return "SUSPENDED";
    case JOB_COMPLETE: return "COMPLETED";
    case JOB_CANCELLED: return "CANCELLED";
    case JOB_FAILED: return "FAILED";
    case JOB_TIMEOUT: return "TIMEOUT";
    case JOB_NODE_FAIL: return "NODE_FAIL";
    case JOB_PREEMPTED: return "PREEMPTED";
    case JOB_BOOT_FAIL: return "BOOT_FAIL";
    case JOB_DEADLINE: return "DEADLINE";
    case JOB_OOM: return "OUT_OF_MEMORY";
    default: return "UNKNOWN";
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2 || std::strlen(argv[1]) == 0 || std::strlen(argv[1]) > 10 ||
        std::strspn(argv[1], "0123456789") != std::strlen(argv[1])) {
        std::fprintf(stderr, "usage: slurm-vm-job-info JOBID\n");
        return 2;
    }
    unsigned long long id = std::strtoull(argv[1], nullptr, 10);
    if (id == 0 || id > UINT32_MAX) {
        std::fprintf(stderr, "slurm-vm-job-info: %s is not a job id\n", argv[1]);
        return 2;
    }
    slurm_init(nullptr);
    job_info_msg_t* msg = nullptr;
    if (load_job(&msg, static_cast<uint32_t>(id)) != SLURM_SUCCESS) {
        std::fprintf(stderr, "slurm-vm-job-info: job %llu: %s\n", id, slurm_strerror(errno));
        slurm_fini();
        return 1;
    }
    json_t* jobs = json_array();
    for (uint32_t i = 0; msg && i < msg->record_count; ++i) {
        const slurm_job_info_t* j = &msg->job_array[i];
        json_t* o = json_object();
        json_object_set_new(o, "job_id", json_integer(j->job_id));
        json_t* c = j->admin_comment ? json_string(j->admin_comment) : json_null();
        // Not UTF-8: not a record slurm-vm wrote (it is replaced, and said so).
        json_object_set_new(o, "admin_comment", c ? c : json_string("(not UTF-8)"));
        json_object_set_new(o, "state", json_string(base_state_name(j->job_state)));
        json_object_set_new(o, "requeue", json_boolean((j->job_state & JOB_REQUEUE) != 0));
        json_object_set_new(o, "preempt_time", json_integer(static_cast<json_int_t>(j->preempt_time)));
        json_object_set_new(o, "restart_cnt", json_integer(j->restart_cnt));
        json_array_append_new(jobs, o);
    }
    slurm_free_job_info_msg(msg);
    slurm_fini();
    json_t* out = json_object();
    json_object_set_new(out, "jobs", jobs);
    int rc = json_dumpf(out, stdout, JSON_COMPACT) == 0 && std::fputc('\n', stdout) != EOF ? 0 : 1;
    json_decref(out);
    return std::fflush(stdout) == 0 ? rc : 1;
}
