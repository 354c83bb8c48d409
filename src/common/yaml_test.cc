#include "common/yaml.h"

#include <gtest/gtest.h>

namespace trainwatch::common::yaml {
namespace {

std::string Message(const Status& s) { return s.ok() ? "ok" : s.message(); }

TEST(YamlTest, ErrorsNameTheLineAndTheField) {
  YAML::Node root = YAML::Load("a: 1\nb:\n  c: [x, {d: e}]\n");
  EXPECT_EQ(Message(Err(root["b"]["c"], "b.c", "bad")), "line 3: b.c: bad");
  // A node built in code has no line; a check across fields names none.
  EXPECT_EQ(Message(Err(YAML::Node("x"), "f", "bad")), "f: bad");
  EXPECT_EQ(Message(Err("f", "bad")), "f: bad");
  EXPECT_EQ(Message(Str(root["b"]["c"], "b.c").status()), "line 3: b.c: expected a string");
  EXPECT_EQ(Message(StrList(root["b"]["c"], "b.c").status()), "line 3: b.c[1]: expected a string");
  EXPECT_EQ(Message(Uint(YAML::Load("-1"), "n").status()), "line 1: n: invalid integer \"-1\"");
  EXPECT_EQ(Message(Dur(YAML::Load("5x"), "d").status()), "line 1: d: invalid duration \"5x\"");
}

TEST(YamlTest, AbsentAndNullReadAsEmpty) {
  YAML::Node root = YAML::Load("a: ~\n");
  EXPECT_EQ(*Str(root["a"], "a"), "");
  EXPECT_EQ(*Str(root["missing"], "missing"), "");
  EXPECT_TRUE(StrList(root["a"], "a")->empty());
  EXPECT_FALSE(*Map(root["missing"], "missing"));
  std::string s = "kept";
  ASSERT_TRUE(OptStr(root, "a", "root", &s).ok());
  EXPECT_EQ(s, "kept");
  EXPECT_EQ(Message(Map(YAML::Load("x: 1")["x"], "x").status()), "line 1: x: expected a mapping");
}

TEST(YamlTest, BooleansAreGoYamlV2s) {
  for (const char* t : {"true", "True", "TRUE", "yes", "Yes", "YES", "y", "Y", "on", "On", "ON"}) {
    EXPECT_TRUE(*Bool(YAML::Node(t), "b")) << t;
  }
  for (const char* f : {"false", "False", "FALSE", "no", "No", "NO", "n", "N", "off", "Off", "OFF"}) {
    EXPECT_FALSE(*Bool(YAML::Node(f), "b")) << f;
  }
  EXPECT_EQ(Message(Bool(YAML::Load("maybe"), "b").status()), "line 1: b: invalid boolean \"maybe\"");
  EXPECT_EQ(Message(Bool(YAML::Load("[true]"), "b").status()), "line 1: b: expected true or false");
}

TEST(YamlTest, CheckKeysRefusesUnknownRepeatedAndUnsupportedKeys) {
  const KeySet allowed = {"cert_file", "key_file"};
  EXPECT_TRUE(CheckKeys(YAML::Load("cert_file: a\nkey_file: b\n"), "tls", allowed).ok());
  EXPECT_EQ(Message(CheckKeys(YAML::Load("cert_file: a\nbogus: b\n"), "tls", allowed)),
            "line 2: tls: unknown field \"bogus\"");
  // A misspelt key within two edits of a known one gets a suggestion.
  EXPECT_EQ(Message(CheckKeys(YAML::Load("cert_flie: a\n"), "tls", allowed)),
            "line 1: tls: unknown field \"cert_flie\" (did you mean \"cert_file\"?)");
  // yaml.v2 refuses a repeated key; yaml-cpp would keep one of them silently.
  EXPECT_EQ(Message(CheckKeys(YAML::Load("cert_file: a\ncert_file: b\n"), "tls", allowed)),
            "line 2: tls.cert_file: given twice");
  EXPECT_EQ(Message(CheckKeys(YAML::Load("oauth2: {}\n"), "http", allowed, {"oauth2"})),
            "line 1: http.oauth2: not supported by trainwatch; remove it");
  EXPECT_EQ(Message(CheckKeys(YAML::Load("x: 1\n"), "", allowed)), "line 1: top level: unknown field \"x\"");
  EXPECT_EQ(Message(CheckKeys(YAML::Load("[1]"), "tls", allowed)), "line 1: tls: expected a mapping");
}

}  // namespace
}  // namespace trainwatch::common::yaml
