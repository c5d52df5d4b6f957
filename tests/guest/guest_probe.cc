// Run by `polyaccel run` inside the test guest: prints, as one JSON line, what the child got —
// its CPU affinity (sched_getaffinity), its memory policy (get_mempolicy) and the NUMA nodes of
// 16 MiB it touched (move_pages with no target nodes reports where each page is).
#include <numaif.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

int main() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 2;
  std::string cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus += (cpus.empty() ? "" : ",") + std::to_string(c);
  }
  int mode = -1;
  unsigned long mask[16] = {};
  if (get_mempolicy(&mode, mask, sizeof mask * 8, nullptr, 0) != 0) return 2;
  std::string nodes;
  for (unsigned n = 0; n < sizeof mask * 8; ++n) {
    if (mask[n / (8 * sizeof(unsigned long))] >> (n % (8 * sizeof(unsigned long))) & 1)
      nodes += (nodes.empty() ? "" : ",") + std::to_string(n);
  }
  const long page = sysconf(_SC_PAGESIZE);
  const size_t bytes = 16u << 20;
  auto* p = static_cast<char*>(
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (p == MAP_FAILED) return 2;
  std::vector<void*> pages;
  for (size_t off = 0; off < bytes; off += static_cast<size_t>(page)) {
    p[off] = 1;
    pages.push_back(p + off);
  }
  std::vector<int> status(pages.size(), -1);
  if (move_pages(0, pages.size(), pages.data(), nullptr, status.data(), 0) != 0) return 2;
  std::set<int> on;
  for (int s : status)
    on.insert(s);
  std::string page_nodes;
  for (int n : on)
    page_nodes += (page_nodes.empty() ? "" : ",") + std::to_string(n);
  const char* rank = std::getenv("LOCAL_RANK");
  std::printf(
      "{\"rank\": \"%s\", \"cpus\": \"%s\", \"mempolicy_mode\": %d, \"mempolicy_nodes\": \"%s\", "
      "\"page_nodes\": \"%s\"}\n",
      rank ? rank : "", cpus.c_str(), mode, nodes.c_str(), page_nodes.c_str());
  return 0;
}
