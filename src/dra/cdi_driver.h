// The NVIDIA driver's user-space files a CDI spec gives a container, found under a driver root
// ("/" for a driver installed on the host, /run/nvidia/driver for the GPU Operator's containerized
// driver) the way NVIDIA's own generator finds them (nvidia-container-toolkit, `nvidia-ctk cdi
// generate`: pkg/nvcdi/driver-nvml.go, internal/lookup/root/root.go, pkg/lookup/library.go,
// internal/discover/{ipc,symlinks,ldconfig}.go; read, not copied):
//
//   version    the suffix of libcuda.so.<version>, else of libnvidia-ml.so.<version>, in the
//              first library directory that has one (the toolkit's inferVersion, its fallback
//              when NVML does not answer); the directories are the toolkit's search paths, then
//              those the driver root's /etc/ld.so.cache names for libcuda and libnvidia-ml
//   libraries  every "*.so.<version>" in the directories that hold lib*.so.<version>, and in
//              their vdpau/ (getVersionLibs): libcuda, libnvidia-ml, -ptxjitcompiler, -nvvm,
//              -cfg, -opencl, -gpucomp, -allocator, libcudadebugger, ... and the graphics ones
//   binaries   nvidia-smi, nvidia-debugdump, nvidia-persistenced, nvidia-cuda-mps-control,
//              nvidia-cuda-mps-server, nvidia-imex, nvidia-imex-ctl in the usual bin directories
//   IPC        /run (or /var/run) nvidia-persistenced/socket, nvidia-fabricmanager/socket, and
//              /tmp/nvidia-mps, those that exist (sockets must be sockets, MPS a directory)
//   firmware   /lib/firmware[/updates]/nvidia/<version>/gsp*.bin
//   symlinks   for the create-symlinks hook: <soname> -> the library (its ELF DT_SONAME, e.g.
//              libcuda.so.1 -> libcuda.so.550.54.15) and libcuda.so -> libcuda.so.1
//
// Mounts are read-only binds with the toolkit's options ["ro","nosuid","nodev","rbind",
// "rprivate"]; the IPC ones writable and noexec. Every file is resolved inside the driver root
// (openat2 RESOLVE_IN_ROOT: a symbolic link cannot lead out of it), must be the expected type
// (regular file, socket or directory) and a library at most 1 GiB; a directory listing stops
// after kMaxDirEntries. A file that fails is left out and said so in `notes`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace polyaccel::dra {

struct CdiMount {
  std::string host_path;
  std::string container_path;
  std::vector<std::string> options;
  bool operator==(const CdiMount&) const = default;
};

struct CdiHook {
  std::string hook_name = "createContainer";
  std::string path;               // on the host
  std::vector<std::string> args;  // args[0] is the program's name
  bool operator==(const CdiHook&) const = default;
};

struct NvidiaDriverFiles {
  std::string root;     // the driver root as given
  std::string version;  // "550.54.15"; empty: no driver libraries found
  std::vector<CdiMount> mounts;
  std::vector<std::string> symlinks;      // "TARGET::LINK" (LINK a path in the container)
  std::vector<std::string> library_dirs;  // container paths of the libraries' directories
  std::vector<std::string> notes;         // what was left out and why
  bool empty() const { return mounts.empty(); }
};

inline constexpr std::size_t kMaxDirEntries = 100000;

// Reads nothing outside `driver_root`. A root without driver libraries gives an empty result
// with a note; not an error (a node without the NVIDIA driver). `host_driver_root`: where the
// runtime finds the same root on the host when this one runs in a container that mounts it
// elsewhere (host's / at /host: --driver-root /host --host-driver-root /); empty: the same.
NvidiaDriverFiles read_nvidia_driver(const std::string& driver_root,
                                     const std::string& host_driver_root = {});

// The GPU Operator's driver container installs the driver under the host's /run/nvidia/driver,
// not in the host's root. When `driver_root` holds no NVIDIA driver and its run/nvidia/driver
// does, that is the driver root, and `host_driver_root`'s (or `driver_root`'s) run/nvidia/driver
// the host's path of it; otherwise both are given back as they are.
struct DriverRoots {
  std::string driver_root;
  std::string host_driver_root;
  bool gpu_operator = false;  // moved to run/nvidia/driver
};
DriverRoots find_gpu_operator_driver(const std::string& driver_root,
                                     const std::string& host_driver_root);

// The hooks a spec with these driver files runs: create-symlinks (when there are links) and
// update-ldcache (its --folder per library directory), both run as `hook_path ...`, the static
// polyaccel-cdi-hook (src/cdi_hook/hook.h).
std::vector<CdiHook> nvidia_hooks(const NvidiaDriverFiles& driver, const std::string& hook_path);

}  // namespace polyaccel::dra
