// histogram_quantile, histogram_fraction, histogram_stddev and
// histogram_stdvar on single histograms, checked against the expectations
// of Prometheus's PromQL test corpus (native_histograms.test) and against
// hand-derived values for the special cases.

#include "model/histogram_estimate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "model/histogram_test_util.h"

namespace trainwatch::model {
namespace {

using testing::AlmostEqual;
using testing::ParseTestHistogram;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

enum Fn { kQuantile, kFraction, kStddev, kStdvar };
enum Info { kAnyInfo, kInfo, kNoInfo };

struct CorpusCase {
  int line;  // in native_histograms.test
  Fn fn;
  double a, b;  // q, or lower and upper
  const char* histogram;
  double want;
  Info info;
};

// Every eval of these functions on a histogram loaded on its own, as the
// corpus has them (line numbers of /work/shared/conformance/promql/
// native_histograms.test).
const CorpusCase kCorpus[] = {
    {49, kFraction, 1, 2, "schema:0 sum:5 count:4 buckets:[1 2 1]", 0.5, kAnyInfo},
    {53, kFraction, 0, 8, "schema:0 sum:5 count:4 buckets:[1 2 1]", 1, kNoInfo},
    {61, kQuantile, 0.5, 0, "schema:0 sum:5 count:4 buckets:[1 2 1]", 1.414213562373095, kNoInfo},
    {211, kFraction, -0.5, 0.5, "schema:0 z_bucket:1 z_bucket_w:0.5 sum:0.25 count:1", 1, kAnyInfo},
    {215, kQuantile, 0.5, 0, "schema:0 z_bucket:1 z_bucket_w:0.5 sum:0.25 count:1", 0, kAnyInfo},
    {234, kFraction, -2, -1, "schema:0 sum:-5 count:4 n_buckets:[1 2 1]", 0.5, kAnyInfo},
    {238, kQuantile, 0.5, 0, "schema:0 sum:-5 count:4 n_buckets:[1 2 1]", -1.414213562373095, kAnyInfo},
    {332, kStddev, 0, 0, "schema:2 count:4 sum:10 buckets:[1 0 0 0 1 0 0 1 1]", 1.0787993180043811, kAnyInfo},
    {335, kStdvar, 0, 0, "schema:2 count:4 sum:10 buckets:[1 0 0 0 1 0 0 1 1]", 1.163807968526718, kAnyInfo},
    {344, kStddev, 0, 0, "schema:8 count:10 sum:10 buckets:[1 2 3 4]", 0.0048960313898237465, kAnyInfo},
    {347, kStdvar, 0, 0, "schema:8 count:10 sum:10 buckets:[1 2 3 4]", 2.3971123370139447e-05, kAnyInfo},
    {356, kStddev, 0, 0, "schema:3 count:7 sum:62 z_bucket:1 buckets:[0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 1 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 ] n_buckets:[0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 ]", 42.94723640026, kAnyInfo},
    {359, kStdvar, 0, 0, "schema:3 count:7 sum:62 z_bucket:1 buckets:[0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 1 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 ] n_buckets:[0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 ]", 1844.4651144196398, kAnyInfo},
    {368, kStddev, 0, 0, "schema:0 count:10 sum:-112946 z_bucket:0 n_buckets:[0 0 1 1 1 0 1 1 0 0 3 0 0 0 1 0 0 1]", 27556.344499842, kAnyInfo},
    {371, kStdvar, 0, 0, "schema:0 count:10 sum:-112946 z_bucket:0 n_buckets:[0 0 1 1 1 0 1 1 0 0 3 0 0 0 1 0 0 1]", 759352122.1939945, kAnyInfo},
    {380, kStddev, 0, 0, "schema:0 count:10 sum:-100 z_bucket:0 n_buckets:[0 0 0 0 10]", 1.3137084989848, kAnyInfo},
    {383, kStdvar, 0, 0, "schema:0 count:10 sum:-100 z_bucket:0 n_buckets:[0 0 0 0 10]", 1.725830020304794, kAnyInfo},
    {392, kStddev, 0, 0, "schema:3 count:7 sum:NaN z_bucket:1 buckets:[0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 1 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 ] n_buckets:[0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 ]", kNaN, kAnyInfo},
    {395, kStdvar, 0, 0, "schema:3 count:7 sum:NaN z_bucket:1 buckets:[0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 1 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 ] n_buckets:[0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 ]", kNaN, kAnyInfo},
    {404, kStddev, 0, 0, "schema:3 count:7 sum:Inf z_bucket:1 buckets:[0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 1 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 ] n_buckets:[0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 ]", kInf, kAnyInfo},
    {407, kStdvar, 0, 0, "schema:3 count:7 sum:Inf z_bucket:1 buckets:[0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 1 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 ] n_buckets:[0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 ]", kInf, kAnyInfo},
    {416, kQuantile, 1.001, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", kInf, kAnyInfo},
    {420, kQuantile, 1, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 16, kAnyInfo},
    {427, kQuantile, 0.99, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 15.67072476139083, kAnyInfo},
    {431, kQuantile, 0.9, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 12.99603834169977, kAnyInfo},
    {435, kQuantile, 0.6, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 4.594793419988138, kAnyInfo},
    {439, kQuantile, 0.5, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 1.5874010519681994, kAnyInfo},
    {444, kQuantile, 0.1, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 0.0006, kAnyInfo},
    {448, kQuantile, 0, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {452, kQuantile, -1, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", -kInf, kAnyInfo},
    {462, kQuantile, 1.001, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", kInf, kAnyInfo},
    {466, kQuantile, 1, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {473, kQuantile, 0.99, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", -0.00006, kAnyInfo},
    {477, kQuantile, 0.9, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", -0.0006, kAnyInfo},
    {481, kQuantile, 0.5, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", -1.5874010519681996, kAnyInfo},
    {485, kQuantile, 0.1, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", -12.996038341699768, kAnyInfo},
    {489, kQuantile, 0, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", -16, kAnyInfo},
    {493, kQuantile, -1, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", -kInf, kAnyInfo},
    {505, kQuantile, 1.001, 0, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", kInf, kAnyInfo},
    {509, kQuantile, 1, 0, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 16, kAnyInfo},
    {513, kQuantile, 0.99, 0, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 15.34822590920423, kAnyInfo},
    {517, kQuantile, 0.9, 0, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 10.556063286183155, kAnyInfo},
    {521, kQuantile, 0.7, 0, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 1.2030250360821164, kAnyInfo},
    {527, kQuantile, 0.55, 0, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 0.0006, kAnyInfo},
    {531, kQuantile, 0.5, 0, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {535, kQuantile, 0.45, 0, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", -0.0006, kAnyInfo},
    {540, kQuantile, 0.3, 0, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", -1.2030250360821169, kAnyInfo},
    {544, kQuantile, 0.1, 0, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", -10.556063286183155, kAnyInfo},
    {548, kQuantile, 0.01, 0, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", -15.34822590920423, kAnyInfo},
    {552, kQuantile, 0, 0, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", -16, kAnyInfo},
    {556, kQuantile, -1, 0, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", -kInf, kAnyInfo},
    {650, kFraction, 3.1415, 42, "", kNaN, kAnyInfo},
    {662, kFraction, -kInf, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {665, kFraction, -0.001, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {668, kFraction, 0, 0.001, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 0.16666666666666666, kAnyInfo},
    {676, kFraction, 0, 0.0005, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 0.08333333333333333, kAnyInfo},
    {681, kQuantile, 0.08333333333333333, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 0.0005, kAnyInfo},
    {687, kFraction, 1, 2, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 0.25, kAnyInfo},
    {694, kFraction, 0, 1.5, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 0.4795739585136224, kAnyInfo},
    {697, kFraction, 1.5, 2, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 0.10375937481971091, kAnyInfo},
    {700, kFraction, 1, 8, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 0.3333333333333333, kAnyInfo},
    {703, kFraction, 0, 6, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 0.6320802083934297, kAnyInfo},
    {706, kQuantile, 0.6320802083934297, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 6, kAnyInfo},
    {709, kFraction, 1, 6, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 0.29874687506009634, kAnyInfo},
    {712, kFraction, 1.5, 6, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 0.15250624987980724, kAnyInfo},
    {715, kFraction, -2, -1, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {718, kFraction, -2, -1.5, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {721, kFraction, -8, -1, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {724, kFraction, -6, -1, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {727, kFraction, -6, -1.5, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {730, kFraction, 42, 3.1415, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {733, kFraction, 0, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {736, kFraction, 0.000001, 0.000001, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {739, kFraction, 42, 42, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {742, kFraction, -3.1, -3.1, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {745, kFraction, 3.1415, kNaN, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", kNaN, kAnyInfo},
    {748, kFraction, kNaN, 42, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", kNaN, kAnyInfo},
    {751, kFraction, kNaN, kNaN, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]", kNaN, kAnyInfo},
    {764, kFraction, -kInf, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", 1, kAnyInfo},
    {767, kFraction, -0.001, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", 0.16666666666666666, kAnyInfo},
    {770, kFraction, 0, 0.001, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {773, kFraction, -0.0005, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", 0.08333333333333333, kAnyInfo},
    {779, kQuantile, 0.9166666666666666, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", -0.0005, kAnyInfo},
    {788, kFraction, 1, 2, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {791, kFraction, 1.5, 2, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {794, kFraction, 1, 8, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {797, kFraction, 1, 6, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {800, kFraction, 1.5, 6, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {803, kFraction, -2, -1, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", 0.25, kAnyInfo},
    {806, kFraction, -2, -1.5, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", 0.10375937481971091, kAnyInfo},
    {809, kFraction, -8, -1, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", 0.3333333333333333, kAnyInfo},
    {815, kQuantile, 0.36791979160657035, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", -6, kAnyInfo},
    {818, kFraction, -6, -1, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", 0.29874687506009634, kAnyInfo},
    {821, kFraction, -6, -1.5, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", 0.15250624987980724, kAnyInfo},
    {824, kFraction, 42, 3.1415, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {827, kFraction, 0, 0, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {830, kFraction, 0.000001, 0.000001, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {833, kFraction, 42, 42, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {836, kFraction, -3.1, -3.1, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {839, kFraction, 3.1415, kNaN, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", kNaN, kAnyInfo},
    {842, kFraction, kNaN, 42, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", kNaN, kAnyInfo},
    {845, kFraction, kNaN, kNaN, "schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]", kNaN, kAnyInfo},
    {860, kFraction, -kInf, 0, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 0.5, kAnyInfo},
    {863, kFraction, -0.001, 0, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 0.08333333333333333, kAnyInfo},
    {866, kFraction, 0, 0.001, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 0.08333333333333333, kAnyInfo},
    {869, kFraction, -0.0005, 0.0005, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 0.08333333333333333, kAnyInfo},
    {875, kQuantile, 0.5416666666666666, 0, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 0.0005, kAnyInfo},
    {881, kQuantile, 0.4583333333333333, 0, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", -0.0005, kAnyInfo},
    {890, kFraction, 1, 2, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 0.125, kAnyInfo},
    {893, kFraction, 1.5, 2, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 0.051879687409855414, kAnyInfo},
    {896, kFraction, 1, 8, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 0.16666666666666666, kAnyInfo},
    {899, kFraction, 1, 6, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 0.14937343753004825, kAnyInfo},
    {902, kFraction, 1.5, 6, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 0.07625312493990366, kAnyInfo},
    {905, kFraction, -2, -1, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 0.125, kAnyInfo},
    {908, kFraction, -2, -1.5, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 0.051879687409855456, kAnyInfo},
    {911, kFraction, -8, -1, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 0.16666666666666666, kAnyInfo},
    {914, kFraction, -6, -1, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 0.14937343753004817, kAnyInfo},
    {917, kFraction, -6, -1.5, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 0.07625312493990362, kAnyInfo},
    {920, kFraction, 42, 3.1415, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {923, kFraction, 0, 0, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {926, kFraction, 0.000001, 0.000001, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {929, kFraction, 42, 42, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {932, kFraction, -3.1, -3.1, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", 0, kAnyInfo},
    {935, kFraction, 3.1415, kNaN, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", kNaN, kAnyInfo},
    {938, kFraction, kNaN, 42, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", kNaN, kAnyInfo},
    {941, kFraction, kNaN, kNaN, "schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]", kNaN, kAnyInfo},
};

TEST(HistogramEstimateTest, MatchesPrometheusCorpus) {
  for (const CorpusCase& c : kCorpus) {
    SCOPED_TRACE("native_histograms.test:" + std::to_string(c.line) + " " + c.histogram);
    FloatHistogram h = ParseTestHistogram(c.histogram);
    ASSERT_TRUE(h.Validate().ok()) << h.Validate().ToString();
    HistogramEstimateNotes notes;
    double got = 0;
    bool info = false;
    switch (c.fn) {
      case kQuantile:
        got = HistogramQuantile(c.a, h, &notes);
        info = notes.quantile_nan_result || notes.quantile_nan_skew;
        break;
      case kFraction:
        got = HistogramFraction(c.a, c.b, h, &notes);
        info = notes.fraction_nans;
        break;
      case kStddev:
        got = std::sqrt(HistogramVariance(h));
        break;
      case kStdvar:
        got = HistogramVariance(h);
        break;
    }
    EXPECT_TRUE(AlmostEqual(c.want, got)) << "want " << c.want << " got " << got;
    if (c.info == kNoInfo) {
      EXPECT_FALSE(info);
    }
  }
}

TEST(HistogramEstimateTest, QuantileSpecialCases) {
  FloatHistogram h = ParseTestHistogram("count:3 sum:4 buckets:[1 2]");
  EXPECT_EQ(HistogramQuantile(-0.1, h, nullptr), -kInf);
  EXPECT_EQ(HistogramQuantile(1.1, h, nullptr), kInf);
  EXPECT_TRUE(std::isnan(HistogramQuantile(kNaN, h, nullptr)));
  EXPECT_TRUE(std::isnan(HistogramQuantile(0.5, FloatHistogram(), nullptr)));
  // Exponential buckets interpolate on a log scale: halfway through (1,2].
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.6666666666666666, h, nullptr), std::exp2(0.5));
  // The zero bucket starts at 0 when there are only positive buckets.
  h = ParseTestHistogram("count:4 sum:1 z_bucket:2 z_bucket_w:0.5 buckets:[2]");
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.25, h, nullptr), 0.25);
  h = ParseTestHistogram("count:4 sum:-1 z_bucket:2 z_bucket_w:0.5 n_buckets:[2]");
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.75, h, nullptr), -0.25);
}

TEST(HistogramEstimateTest, QuantileOfCustomBucketsIsLinearAndClampsInfiniteBuckets) {
  FloatHistogram h = ParseTestHistogram("schema:-53 count:4 sum:1 custom_values:[1 2] buckets:[1 2 1]");
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.1, h, nullptr), 0.4);  // first bucket taken to start at 0
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.5, h, nullptr), 1.5);
  EXPECT_EQ(HistogramQuantile(0.9, h, nullptr), 2);  // in the +Inf bucket: its lower bound
  h = ParseTestHistogram("schema:-53 count:2 sum:-5 custom_values:[-1] buckets:[2]");
  EXPECT_EQ(HistogramQuantile(0.3, h, nullptr), -1);  // first bucket ends below 0: its upper bound
}

TEST(HistogramEstimateTest, NaNObservationsRaiseNotes) {
  // Four observations, one of them NaN: in the count, in no bucket.
  FloatHistogram h = ParseTestHistogram("count:4 sum:NaN buckets:[1 2]");
  HistogramEstimateNotes notes;
  EXPECT_TRUE(std::isnan(HistogramQuantile(0.9, h, &notes)));
  EXPECT_TRUE(notes.quantile_nan_result);
  EXPECT_FALSE(notes.quantile_nan_skew);
  notes = {};
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.5, h, &notes), std::exp2(0.5));
  EXPECT_TRUE(notes.quantile_nan_skew);
  EXPECT_FALSE(notes.quantile_nan_result);
  notes = {};
  EXPECT_EQ(HistogramFraction(-kInf, kInf, h, &notes), 0.75);
  EXPECT_TRUE(notes.fraction_nans);
  // A NaN sum from +Inf and -Inf observations, all in buckets: no note.
  h = ParseTestHistogram("count:3 sum:NaN buckets:[1 2]");
  notes = {};
  EXPECT_EQ(HistogramFraction(-kInf, kInf, h, &notes), 1);
  HistogramQuantile(0.5, h, &notes);
  EXPECT_FALSE(notes.fraction_nans || notes.quantile_nan_skew || notes.quantile_nan_result);
}

TEST(HistogramEstimateTest, FractionSpecialCases) {
  FloatHistogram h = ParseTestHistogram("count:3 sum:4 buckets:[1 2]");
  EXPECT_TRUE(std::isnan(HistogramFraction(0, 1, FloatHistogram(), nullptr)));
  EXPECT_TRUE(std::isnan(HistogramFraction(kNaN, 1, h, nullptr)));
  EXPECT_TRUE(std::isnan(HistogramFraction(0, kNaN, h, nullptr)));
  EXPECT_EQ(HistogramFraction(2, 1, h, nullptr), 0);
  EXPECT_EQ(HistogramFraction(1, 1, h, nullptr), 0);
  EXPECT_DOUBLE_EQ(HistogramFraction(-kInf, 1, h, nullptr), 1.0 / 3);
  EXPECT_DOUBLE_EQ(HistogramFraction(1, std::sqrt(2.0), h, nullptr), 1.0 / 3);  // half of (1,2] on a log scale
  EXPECT_EQ(HistogramFraction(-kInf, kInf, h, nullptr), 1);
}

TEST(HistogramEstimateTest, VarianceUsesBucketMeans) {
  // Geometric means ±sqrt(0.5) around a mean of 0.
  FloatHistogram h = ParseTestHistogram("count:2 sum:0 buckets:[1] n_buckets:[1]");
  EXPECT_DOUBLE_EQ(HistogramVariance(h), 0.5);
  // Arithmetic mean 1.5 of (1,2], equal to the mean: no spread.
  h = ParseTestHistogram("schema:-53 count:2 sum:3 custom_values:[1 2] offset:1 buckets:[2]");
  EXPECT_EQ(HistogramVariance(h), 0);
  // The zero bucket counts as 0.
  h = ParseTestHistogram("count:2 sum:2 z_bucket:1 z_bucket_w:0.001 offset:1 buckets:[1]");
  EXPECT_DOUBLE_EQ(HistogramVariance(h), (1 + std::pow(std::sqrt(2.0) - 1, 2)) / 2);
  EXPECT_TRUE(std::isnan(HistogramVariance(ParseTestHistogram("count:2 sum:NaN buckets:[2]"))));
}

}  // namespace
}  // namespace trainwatch::model
