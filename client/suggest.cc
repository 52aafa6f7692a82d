#include "client/suggest.h"

#include <algorithm>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace gpupipe {
namespace client {

int EditDistance(absl::string_view a_in, absl::string_view b_in) {
  const std::string a = absl::AsciiStrToLower(a_in);
  const std::string b = absl::AsciiStrToLower(b_in);
  // Optimal string alignment distance: Levenshtein plus swaps of adjacent characters, the most
  // common typo. Three rows suffice.
  const size_t n = b.size();
  std::vector<int> before(n + 1), previous(n + 1), current(n + 1);
  for (size_t j = 0; j <= n; ++j) previous[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = static_cast<int>(i);
    for (size_t j = 1; j <= n; ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        current[j] = std::min(current[j], before[j - 2] + 1);
      }
    }
    std::swap(before, previous);
    std::swap(previous, current);
  }
  return previous[n];
}

std::string ClosestMatch(absl::string_view word, const std::vector<std::string>& candidates) {
  const int allowed = word.size() <= 4 ? 1 : word.size() <= 8 ? 2 : 3;
  int best = std::numeric_limits<int>::max();
  std::string match;
  for (const std::string& candidate : candidates) {
    const int d = EditDistance(word, candidate);
    if (d < best) {
      best = d;
      match = candidate;
    }
  }
  if (best > allowed || best >= static_cast<int>(word.size())) return "";
  return match;
}

std::string DidYouMean(absl::string_view word, const std::vector<std::string>& candidates) {
  const std::string match = ClosestMatch(word, candidates);
  return match.empty() ? "" : absl::StrCat(": did you mean '", match, "'?");
}

}  // namespace client
}  // namespace gpupipe
