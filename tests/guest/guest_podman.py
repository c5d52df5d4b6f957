"""podman in the test guest, as Guest.cdi uses it (cdi_podman.py): storage (vfs), runtime state and configuration on the guest's tmpfs under
WORK, the cgroupfs manager, crun, no registry to pull from. Each call is timed."""
import os
import subprocess
import time


class Podman:
    def __init__(self, work):
        for d in ("storage", "runroot", "libpod-tmp", "copy-tmp", "cni", "tmp"):
            os.makedirs("%s/%s" % (work, d), exist_ok=True)
        with open(work + "/containers.conf", "w") as f:
            f.write('[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\nruntime = "crun"\n'
                    'tmp_dir = "%s/libpod-tmp"\nimage_copy_tmp_dir = "%s/copy-tmp"\n'
                    '[network]\nnetwork_config_dir = "%s/cni"\n' % (work, work, work))
        with open(work + "/storage.conf", "w") as f:
            f.write('[storage]\ndriver = "vfs"\ngraphroot = "%s/storage"\nrunroot = "%s/runroot"\n'
                    % (work, work))
        with open(work + "/registries.conf", "w") as f:
            f.write("unqualified-search-registries = []\n")
        self.env = dict(os.environ, CONTAINERS_CONF=work + "/containers.conf",
                        CONTAINERS_STORAGE_CONF=work + "/storage.conf",
                        CONTAINERS_REGISTRIES_CONF=work + "/registries.conf", TMPDIR=work + "/tmp")
        self.seconds = []

    def __call__(self, *args, timeout=300):
        t = time.monotonic()
        r = subprocess.run(["podman", *args], capture_output=True, text=True, env=self.env,
                           timeout=timeout)
        self.seconds.append(time.monotonic() - t)
        return r

    def summary(self):
        return "podman calls: %d, %.1f s in all, %s s each" % (
            len(self.seconds), sum(self.seconds), ["%.1f" % s for s in self.seconds])
