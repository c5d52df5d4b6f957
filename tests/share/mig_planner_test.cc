// The MIG planner against an independent brute-force search, on every model of the tables, and
// on the smallest-change examples of issue 8 (grow, shrink, busy instances).
#include "share/mig_planner.h"

#include <gtest/gtest.h>

#include <set>

#include "share/mig_profiles.h"

namespace polyaccel {
namespace {

using Counts = std::vector<unsigned>;

// Brute force, written apart from the planner: walk the memory slices left to right; each slice
// is left free or starts an instance of any profile allowed to start there.
void walk(const MigGeometry& g, unsigned slice, Counts& counts, unsigned compute, unsigned n,
          std::set<Counts>& seen) {
  if (slice >= g.memory_slices) {
    seen.insert(counts);
    return;
  }
  walk(g, slice + 1, counts, compute, n, seen);
  for (size_t p = 0; p < g.profiles.size(); ++p) {
    const MigProfile& prof = g.profiles[p];
    bool can_start = false;
    for (unsigned s : prof.starts)
      can_start = can_start || s == slice;
    if (!can_start || slice + prof.memory_slices > g.memory_slices) continue;
    if (counts[p] + 1 > prof.max_instances || n + 1 > g.max_instances) continue;
    if (compute + prof.compute_slices > g.compute_slices) continue;
    ++counts[p];
    walk(g, slice + prof.memory_slices, counts, compute + prof.compute_slices, n + 1, seen);
    --counts[p];
  }
}

std::set<Counts> brute_force(const MigGeometry& g) {
  std::set<Counts> seen;
  Counts counts(g.profiles.size(), 0);
  walk(g, 0, counts, 0, 0, seen);
  return seen;
}

// Every count vector up to each profile's maximum, in odometer order.
bool next(Counts& c, const MigGeometry& g) {
  for (size_t p = 0; p < c.size(); ++p) {
    if (c[p] < g.profiles[p].max_instances) {
      ++c[p];
      return true;
    }
    c[p] = 0;
  }
  return false;
}

MigRequest request_of(const MigGeometry& g, const Counts& c) {
  MigRequest r;
  for (size_t p = 0; p < c.size(); ++p) {
    if (c[p]) r.emplace_back(g.profiles[p].name, c[p]);
  }
  return r;
}

// A plan's layout obeys the rules on its own: valid starts, no overlap, the counts asked for.
void expect_valid_layout(const MigGeometry& g, const MigGpuPlan& plan) {
  unsigned used = 0, compute = 0;
  for (const auto& i : plan.instances) {
    const MigProfile* p = g.profile(i.profile);
    ASSERT_NE(p, nullptr) << i.profile;
    EXPECT_NE(std::find(p->starts.begin(), p->starts.end(), i.start), p->starts.end())
        << i.profile << " at " << i.start;
    EXPECT_EQ(i.size, p->memory_slices);
    unsigned mask = ((1u << i.size) - 1) << i.start;
    EXPECT_EQ(used & mask, 0u) << "overlap at " << i.start;
    used |= mask;
    compute += p->compute_slices;
  }
  EXPECT_LE(compute, g.compute_slices);
  EXPECT_LE(plan.instances.size(), g.max_instances);
}

TEST(MigPlanner, EveryCombinationOfEveryModelMatchesBruteForce) {
  for (const MigGeometry& g : builtin_mig_geometries()) {
    std::set<Counts> valid = brute_force(g);
    Counts c(g.profiles.size(), 0);
    unsigned fits = 0, refused = 0;
    do {
      bool expected = valid.count(c) > 0;
      ASSERT_EQ(mig_counts_fit(g, c), expected) << g.model << " " << ::testing::PrintToString(c);
      expected ? ++fits : ++refused;
    } while (next(c, g));
    EXPECT_GT(fits, 30u) << g.model;
    EXPECT_GT(refused, 100u) << g.model;
  }
}

TEST(MigPlanner, PlansForOneGpuAreValidLayoutsAndRefusalsHaveAReason) {
  for (const MigGeometry& g : builtin_mig_geometries()) {
    std::set<Counts> valid = brute_force(g);
    Counts c(g.profiles.size(), 0);
    while (next(c, g)) {
      auto plan = plan_mig_spread({{0, &g, true, 0, {}}}, request_of(g, c), false);
      ASSERT_TRUE(plan) << plan.error().message();
      ASSERT_EQ(plan->fit, valid.count(c) > 0) << g.model << " " << ::testing::PrintToString(c);
      if (plan->fit) {
        ASSERT_EQ(plan->gpus.size(), 1u);
        expect_valid_layout(g, plan->gpus[0]);
      } else {
        EXPECT_FALSE(plan->reason.empty());
      }
    }
  }
}

TEST(MigPlanner, KnownValidMixesFit) {
  const MigGeometry* a100 = find_mig_geometry("A100-40GB");
  ASSERT_NE(a100, nullptr);
  for (MigRequest r : {MigRequest{{"1g.5gb", 2}, {"2g.10gb", 1}, {"3g.20gb", 1}},
                       MigRequest{{"1g.10gb", 4}}, MigRequest{{"4g.20gb", 1}, {"3g.20gb", 1}}}) {
    auto plan = plan_mig_spread({{0, a100, true, 0, {}}}, r, false);
    ASSERT_TRUE(plan);
    EXPECT_TRUE(plan->fit) << plan->reason;
  }
}

const MigGeometry& h200() {
  const MigGeometry* g = find_mig_geometry("H200");
  EXPECT_NE(g, nullptr);
  return *g;
}

std::vector<MigGpuInput> fresh(unsigned n, const MigGeometry& g) {
  std::vector<MigGpuInput> gpus;
  for (unsigned i = 0; i < n; ++i)
    gpus.push_back({i, &g, true, 0, {}});
  return gpus;
}

TEST(MigPlanner, SixSmallAndTwoHalfInstancesOverTwoH200s) {
  auto plan = plan_mig_spread(fresh(2, h200()), {{"1g.18gb", 6}, {"3g.71gb", 2}}, false);
  ASSERT_TRUE(plan);
  ASSERT_TRUE(plan->fit) << plan->reason;
  ASSERT_EQ(plan->gpus.size(), 2u);
  unsigned small = 0, half = 0;
  for (const auto& g : plan->gpus) {
    expect_valid_layout(h200(), g);
    for (const auto& i : g.instances) {
      small += i.profile == "1g.18gb";
      half += i.profile == "3g.71gb";
      EXPECT_FALSE(i.kept);
    }
  }
  EXPECT_EQ(small, 6u);
  EXPECT_EQ(half, 2u);
  EXPECT_EQ(plan->changes(), 8u);
}

TEST(MigPlanner, UsesAsFewGpusAsPossible) {
  // Fits on one GPU: the other three stay empty.
  auto plan = plan_mig_spread(fresh(4, h200()), {{"3g.71gb", 1}, {"1g.18gb", 4}}, false);
  ASSERT_TRUE(plan && plan->fit);
  unsigned used = 0;
  for (const auto& g : plan->gpus)
    used += !g.instances.empty();
  EXPECT_EQ(used, 1u);
  EXPECT_FALSE(plan->gpus[0].instances.empty()) << "the first GPU is filled first";
  // Fourteen 1g need two GPUs, no more.
  plan = plan_mig_spread(fresh(4, h200()), {{"1g.18gb", 14}}, false);
  ASSERT_TRUE(plan && plan->fit);
  used = 0;
  for (const auto& g : plan->gpus)
    used += !g.instances.empty();
  EXPECT_EQ(used, 2u);
}

TEST(MigPlanner, ImpossibleRequestsSayExactlyWhy) {
  auto one = fresh(1, h200());
  struct Case {
    MigRequest request;
    std::string reason;
  } cases[] = {
      {{{"1g.18gb", 8}}, "8 x 1g.18gb requested; a GPU holds at most 7"},
      {{{"1g.18gb+me", 2}}, "2 x 1g.18gb+me requested; a GPU holds at most 1"},
      {{{"3g.71gb", 2}, {"1g.18gb", 1}}, "the request needs 9 memory slices; a GPU has 8"},
      {{{"4g.71gb", 1}, {"2g.35gb", 2}}, "the request needs 8 compute slices; a GPU has 7"},
      {{{"1g.18gb", 7}, {"1g.18gb+me", 1}}, "the request needs 8 compute slices; a GPU has 7"},
  };
  for (const auto& c : cases) {
    auto plan = plan_mig_spread(one, c.request, false);
    ASSERT_TRUE(plan);
    EXPECT_FALSE(plan->fit);
    EXPECT_TRUE(plan->exceeds_hardware);
    EXPECT_EQ(plan->reason, c.reason);
  }
  auto two = plan_mig_spread(fresh(2, h200()), {{"7g.141gb", 3}}, false);
  ASSERT_TRUE(two);
  EXPECT_EQ(two->reason, "3 x 7g.141gb requested; 2 GPUs hold at most 2");
  auto zero = plan_mig_spread(one, {{"2g.35gb", 3}, {"1g.18gb", 0}}, false);
  ASSERT_FALSE(zero) << "a zero count is bad input";
  EXPECT_EQ(zero.error().input, "1g.18gb");
  auto unknown = plan_mig_spread(one, {{"1g.10gb", 1}}, false);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::bad_input);
  EXPECT_NE(unknown.error().remedy.find("1g.18gb"), std::string::npos);
}

// Seven 1g.18gb in slices 0..6, GPU instance ids 10..16; `busy` slices have a process.
MigGpuInput seven_small(const std::set<unsigned>& busy = {}) {
  MigGpuInput gpu{0, &h200(), true, 0x233510DE, {}};
  for (unsigned s = 0; s < 7; ++s) {
    MigPlacedInstance i;
    i.gpu_instance_id = 10 + s;
    i.profile_id = h200().profile("1g.18gb")->profile_id;
    i.profile = "1g.18gb";
    i.start = s;
    i.size = 1;
    if (busy.count(s)) i.pids = {41877};
    gpu.current.push_back(i);
  }
  return gpu;
}

std::set<unsigned> destroyed_slices(const MigGpuPlan& p) {
  std::set<unsigned> s;
  for (const auto& d : p.destroy)
    s.insert(d.start);
  return s;
}

TEST(MigPlanner, GrowKeepsTheInstancesThatCanStay) {
  // 7 x 1g → 3g + 4 x 1g: the 3g goes to slices 4..7, the 1g at 0..3 stay.
  auto plan = plan_mig_spread({seven_small()}, {{"3g.71gb", 1}, {"1g.18gb", 4}}, false);
  ASSERT_TRUE(plan && plan->fit) << plan->reason;
  const auto& g = plan->gpus[0];
  EXPECT_EQ(destroyed_slices(g), (std::set<unsigned>{4, 5, 6}));
  ASSERT_EQ(g.create.size(), 1u);
  EXPECT_EQ(g.create[0].profile, "3g.71gb");
  EXPECT_EQ(g.create[0].start, 4u);
  unsigned kept = 0;
  for (const auto& i : g.instances)
    kept += i.kept;
  EXPECT_EQ(kept, 4u);
  EXPECT_EQ(plan->changes(), 4u);
}

TEST(MigPlanner, ShrinkOnlyDestroys) {
  auto plan = plan_mig_spread({seven_small()}, {{"1g.18gb", 3}}, false);
  ASSERT_TRUE(plan && plan->fit);
  EXPECT_TRUE(plan->gpus[0].create.empty());
  EXPECT_EQ(plan->gpus[0].destroy.size(), 4u);
  // Shrinking around a busy instance keeps it.
  plan = plan_mig_spread({seven_small({6})}, {{"1g.18gb", 1}}, false);
  ASSERT_TRUE(plan && plan->fit);
  ASSERT_EQ(plan->gpus[0].instances.size(), 1u);
  EXPECT_EQ(plan->gpus[0].instances[0].start, 6u);
  EXPECT_TRUE(plan->gpus[0].instances[0].kept);
}

TEST(MigPlanner, BusyInstancesAreKeptUnlessForced) {
  // The 3g fits at 0 (keeping 4, 5, 6) but not with four 1g: the busy one at 5 blocks slices 4..7.
  auto blocked = plan_mig_spread({seven_small({5})}, {{"3g.71gb", 1}, {"1g.18gb", 4}}, false);
  ASSERT_TRUE(blocked);
  EXPECT_FALSE(blocked->fit);
  EXPECT_FALSE(blocked->exceeds_hardware);
  EXPECT_EQ(blocked->reason,
            "GPU 0: 1g.18gb at slice 5 (GPU instance 15) is busy (pids 41877); the layout needs "
            "its place (--force destroys it)");
  auto forced = plan_mig_spread({seven_small({5})}, {{"3g.71gb", 1}, {"1g.18gb", 4}}, true);
  ASSERT_TRUE(forced && forced->fit);
  EXPECT_EQ(destroyed_slices(forced->gpus[0]), (std::set<unsigned>{4, 5, 6}));
  // With three 1g the 3g moves to slices 0..3 and the busy instance stays.
  auto around = plan_mig_spread({seven_small({5})}, {{"3g.71gb", 1}, {"1g.18gb", 3}}, false);
  ASSERT_TRUE(around && around->fit) << around->reason;
  EXPECT_EQ(destroyed_slices(around->gpus[0]), (std::set<unsigned>{0, 1, 2, 3}));
  EXPECT_EQ(around->gpus[0].create[0].start, 0u);
}

TEST(MigPlanner, SpreadPrefersGpusThatNeedNoChange) {
  // GPU 0 is empty, GPU 1 already holds the wanted 3g: nothing is created or destroyed.
  MigGpuInput empty{0, &h200(), true, 0, {}};
  MigGpuInput holding{1, &h200(), true, 0, {}};
  MigPlacedInstance i;
  i.gpu_instance_id = 2;
  i.profile_id = h200().profile("3g.71gb")->profile_id;
  i.profile = "3g.71gb";
  i.start = 4;
  i.size = 4;
  holding.current.push_back(i);
  auto plan = plan_mig_spread({empty, holding}, {{"3g.71gb", 1}}, false);
  ASSERT_TRUE(plan && plan->fit);
  EXPECT_EQ(plan->changes(), 0u);
  // A GPU with MIG off is used only when the enabled ones are full.
  MigGpuInput off{2, &h200(), false, 0, {}};
  plan = plan_mig_spread({off, empty}, {{"7g.141gb", 1}}, false);
  ASSERT_TRUE(plan && plan->fit);
  EXPECT_TRUE(plan->gpus[0].instances.empty());
  EXPECT_FALSE(plan->gpus[0].mode_change);
  plan = plan_mig_spread({off, empty}, {{"7g.141gb", 2}}, false);
  ASSERT_TRUE(plan && plan->fit);
  EXPECT_TRUE(plan->gpus[0].mode_change);
}

TEST(MigPlanner, PerGpuTargetsAsMigPartedGivesThem) {
  std::vector<MigGpuInput> gpus = {seven_small(), {1, &h200(), true, 0, {}}};
  MigGpuTarget balanced{true, {{"1g.18gb", 2}, {"2g.35gb", 1}, {"3g.71gb", 1}}};
  auto plan = plan_mig_per_gpu(gpus, {balanced, balanced}, false);
  ASSERT_TRUE(plan && plan->fit) << plan->reason;
  for (const auto& g : plan->gpus) {
    expect_valid_layout(h200(), g);
    EXPECT_EQ(g.instances.size(), 4u);
  }
  // GPU 0 keeps two of its 1g in place.
  unsigned kept = 0;
  for (const auto& i : plan->gpus[0].instances)
    kept += i.kept;
  EXPECT_EQ(kept, 2u);
  auto disabled = plan_mig_per_gpu({seven_small({3})}, {MigGpuTarget{false, {}}}, false);
  ASSERT_TRUE(disabled);
  EXPECT_FALSE(disabled->fit);
  EXPECT_NE(disabled->reason.find("busy"), std::string::npos);
  auto bad = plan_mig_per_gpu(gpus, {balanced, MigGpuTarget{true, {{"1g.5gb", 1}}}}, false);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().input, "1g.5gb");
}

}  // namespace
}  // namespace polyaccel
