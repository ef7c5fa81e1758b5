// blocks.cpp — block_range (ch08.h): blocks of a vector, chapter 04's chunks
// again. Its own file, off the chapter's reading path: how the chunks are cut
// is chapter 04's hole, and chapter 08 must run before that hole is written.
#include <algorithm>

#include "ch08.h"
#include "dpt/check.h"

namespace dpt::ch08 {

Range block_range(int64_t count, int blocks, int first, int last) {
  DPT_CHECK(blocks >= 1 && first >= 0 && first <= last && last <= blocks,
            "block_range: blocks [" << first << ", " << last << ") of " << blocks);
  int64_t base = count / blocks, extra = count % blocks;
  auto start = [&](int i) { return i * base + std::min<int64_t>(i, extra); };
  return {start(first), start(last)};
}

}  // namespace dpt::ch08
