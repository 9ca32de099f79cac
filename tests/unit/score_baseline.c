/* score_baseline.c — score.c compiled once more for test_score_lanes, with
 * vectors but no AVX2 clone: the path a CPU without AVX2 runs, whatever
 * this CPU picks. Its public names are baseline_*. */
#define SCORE_PREFIX baseline_
#define CALIB_BASELINE_ONLY 1
#include "score_renamed.h"
