#include "core/cpuset.h"

#include <algorithm>
#include <bit>
#include <charconv>

namespace polyaccel {

CpuSet::CpuSet(std::initializer_list<unsigned> indexes) {
  for (unsigned i : indexes)
    set(i);
}

namespace {
std::optional<unsigned> parse_uint(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n'))
    s.remove_suffix(1);
  if (s.empty()) return std::nullopt;
  unsigned v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}
}  // namespace

std::optional<CpuSet> CpuSet::parse_list(std::string_view text) {
  CpuSet out;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.remove_suffix(1);
  if (text.empty()) return out;
  // Refuse absurd indexes rather than allocating gigabytes for a typo.
  constexpr unsigned kMaxIndex = 1u << 20;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(pos, comma - pos);
    size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      auto v = parse_uint(item);
      if (!v || *v > kMaxIndex) return std::nullopt;
      out.set(*v);
    } else {
      auto a = parse_uint(item.substr(0, dash));
      auto b = parse_uint(item.substr(dash + 1));
      if (!a || !b || *a > *b || *b > kMaxIndex) return std::nullopt;
      for (unsigned i = *a; i <= *b; ++i)
        out.set(i);
    }
    pos = comma + 1;
  }
  return out;
}

void CpuSet::set(unsigned index) {
  size_t w = index / 64;
  if (words_.size() <= w) words_.resize(w + 1, 0);
  words_[w] |= std::uint64_t{1} << (index % 64);
}

void CpuSet::clear(unsigned index) {
  size_t w = index / 64;
  if (w < words_.size()) words_[w] &= ~(std::uint64_t{1} << (index % 64));
  trim();
}

bool CpuSet::test(unsigned index) const {
  size_t w = index / 64;
  return w < words_.size() && (words_[w] >> (index % 64)) & 1u;
}

bool CpuSet::empty() const {
  return words_.empty();
}

unsigned CpuSet::count() const {
  unsigned n = 0;
  for (auto w : words_)
    n += static_cast<unsigned>(std::popcount(w));
  return n;
}

std::optional<unsigned> CpuSet::first() const {
  for (size_t w = 0; w < words_.size(); ++w) {
    if (words_[w]) return static_cast<unsigned>(w * 64 + std::countr_zero(words_[w]));
  }
  return std::nullopt;
}

unsigned CpuSet::count_without(const CpuSet& o) const {
  unsigned n = 0;
  for (size_t w = 0; w < words_.size(); ++w)
    n += static_cast<unsigned>(std::popcount(words_[w] & ~(w < o.words_.size() ? o.words_[w] : 0)));
  return n;
}

void CpuSet::append_without(const CpuSet& o, std::vector<unsigned>& out) const {
  for (size_t w = 0; w < words_.size(); ++w) {
    std::uint64_t bits = words_[w] & ~(w < o.words_.size() ? o.words_[w] : 0);
    while (bits) {
      out.push_back(static_cast<unsigned>(w * 64 + std::countr_zero(bits)));
      bits &= bits - 1;
    }
  }
}

std::vector<unsigned> CpuSet::to_vector() const {
  std::vector<unsigned> out;
  for (size_t w = 0; w < words_.size(); ++w) {
    std::uint64_t bits = words_[w];
    while (bits) {
      out.push_back(static_cast<unsigned>(w * 64 + std::countr_zero(bits)));
      bits &= bits - 1;
    }
  }
  return out;
}

std::string CpuSet::to_list() const {
  std::string out;
  auto v = to_vector();
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1)
      ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(v[i]);
    if (j > i) out += '-' + std::to_string(v[j]);
    i = j + 1;
  }
  return out;
}

CpuSet CpuSet::operator|(const CpuSet& o) const {
  CpuSet r = *this;
  r |= o;
  return r;
}

CpuSet& CpuSet::operator|=(const CpuSet& o) {
  if (words_.size() < o.words_.size()) words_.resize(o.words_.size(), 0);
  for (size_t i = 0; i < o.words_.size(); ++i)
    words_[i] |= o.words_[i];
  return *this;
}

CpuSet CpuSet::operator&(const CpuSet& o) const {
  CpuSet r;
  r.words_.resize(std::min(words_.size(), o.words_.size()));
  for (size_t i = 0; i < r.words_.size(); ++i)
    r.words_[i] = words_[i] & o.words_[i];
  r.trim();
  return r;
}

CpuSet CpuSet::operator-(const CpuSet& o) const {
  CpuSet r = *this;
  for (size_t i = 0; i < std::min(r.words_.size(), o.words_.size()); ++i)
    r.words_[i] &= ~o.words_[i];
  r.trim();
  return r;
}

bool CpuSet::intersects(const CpuSet& o) const {
  for (size_t i = 0; i < std::min(words_.size(), o.words_.size()); ++i) {
    if (words_[i] & o.words_[i]) return true;
  }
  return false;
}

bool CpuSet::contains(const CpuSet& o) const {
  return (o - *this).empty();
}

bool CpuSet::operator==(const CpuSet& o) const {
  return words_ == o.words_;
}

void CpuSet::trim() {
  while (!words_.empty() && words_.back() == 0)
    words_.pop_back();
}

}  // namespace polyaccel
