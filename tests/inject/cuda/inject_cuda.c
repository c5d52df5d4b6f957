/* Test build of NVIDIA's libcuda.so.1 for the CDI tests (tests/dra/cdi_test.cc, Guest.cdi): a real
   shared library with the SONAME of the driver's (libcuda.so.1), put at the driver's path as
   libcuda.so.<version> in a test driver root, so that the spec's mount, the create-symlinks hook
   and ldconfig in the container handle it as they would NVIDIA's. It answers two driver-API calls
   and has no device: nothing in polyaccel loads it. */
typedef int CUresult;

__attribute__((visibility("default"))) CUresult cuInit(unsigned int flags) {
  return flags == 0 ? 0 : 1; /* CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE */
}

__attribute__((visibility("default"))) CUresult cuDriverGetVersion(int* version) {
  if (!version) return 1;
  *version = 12040;
  return 0;
}
