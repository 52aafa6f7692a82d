// Suggestions for mistyped names (commands, options, op names): the known name closest to what
// was typed, by edit distance. Pure. Thread-safe.
#ifndef GPUPIPE_CLIENT_SUGGEST_H_
#define GPUPIPE_CLIENT_SUGGEST_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace gpupipe {
namespace client {

// Edits (insertions, deletions, substitutions, swaps of neighbours) that turn `a` into `b`,
// ignoring ASCII case.
int EditDistance(absl::string_view a, absl::string_view b);

// The candidate closest to `word`, when it is close enough to be a likely typo (at most one
// edit for a word of up to four characters, two up to eight, three beyond, and fewer edits
// than the word has characters); "" otherwise. Ties go to the earlier candidate.
std::string ClosestMatch(absl::string_view word, const std::vector<std::string>& candidates);

// ": did you mean 'x'?" for ClosestMatch's x, or "" when there is none.
std::string DidYouMean(absl::string_view word, const std::vector<std::string>& candidates);

}  // namespace client
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_SUGGEST_H_
