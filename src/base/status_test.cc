#include "base/status.h"

#include <gtest/gtest.h>

namespace trainwatch {
namespace {

Result<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument("odd value " + std::to_string(x));
  return x / 2;
}

Result<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(StatusTest, ResultPropagatesErrorsWithMessage) {
  EXPECT_EQ(*Quarter(8), 2);
  auto r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "odd value 3");
  EXPECT_EQ(r.status().Annotate("quarter").ToString(), "invalid argument: quarter: odd value 3");
}

TEST(StatusTest, FromErrnoNamesContext) {
  Status s = Status::FromErrno("open wal/00000012", ENOENT);
  EXPECT_EQ(s.message(), "open wal/00000012: No such file or directory");
}

}  // namespace
}  // namespace trainwatch
