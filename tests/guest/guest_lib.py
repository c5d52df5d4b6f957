"""What the in-guest checks (in_guest.py, in_guest_libvirt.py, cdi_podman.py) share: the check
log, sysfs reads and CPU lists in the kernel's format."""
import sys

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def finish():
    """Exit 1 if any check failed, after saying how many."""
    print("%d failure(s)" % len(failures))
    sys.exit(1 if failures else 0)


def cpulist(text):
    """The kernel's list format ("0-3,8,10-11") as a list of ints."""
    out = []
    for part in str(text).strip().split(","):
        if not part:
            continue
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


def sysfs(path):
    with open(path) as f:
        return f.read().strip()


def normalized(ref):
    """The name a CRI runtime pulls for an image reference (the docker reference rules that
    containerd and CRI-O apply): a first part without '.' or ':' that is not localhost is on
    docker.io, and a one-part name is under library/."""
    first, _, rest = ref.partition("/")
    if not rest:
        return "docker.io/library/" + ref
    if "." not in first and ":" not in first and first != "localhost":
        return "docker.io/" + ref
    return ref
