"""Small formatting helpers of the report."""


def verdict(item):
    if item.get("failed_at_most"):
        return False
    if "ratio" not in item or item.get("ratio") is None:
        return None
    if "target_delta_ms" in item:
        return item["difference_ms"] is not None and item["difference_ms"] <= item["target_delta_ms"]
    if item.get("target_ratio") is None:
        return None  # reported, no target
    return item["ratio"] <= item["target_ratio"]


def fmt_rate(s):
    if not s:
        return "—"
    return f"{s['median']:.0f} MiB/s ({s['min']:.0f}–{s['max']:.0f}, n={s['n']})"


def fmt(s):
    if not s:
        return "—"
    return f"{s['median']:.0f} ms ({s['min']:.0f}–{s['max']:.0f}, n={s['n']})"


def short(text, n=160):
    t = " ".join(str(text).split()).replace("|", "/")
    return t if len(t) <= n else t[:n - 1] + "…"


def times(v):
    return "—" if v is None else f"{v}×"


def yesno(v):
    return "yes" if v is True else "no" if v is False else "—"
