/* score_renamed.h — src/lib/score.c compiled into a test under other names:
 * define SCORE_PREFIX (scalar_, baseline_) and the build's switches
 * (CALIB_NO_VEC4, CALIB_BASELINE_ONLY) first. calib_foo becomes
 * SCORE_PREFIX foo, with the headers' prototypes under the library's names. */
#define SCORE_CAT2(a, b) a##b
#define SCORE_CAT(a, b) SCORE_CAT2(a, b)
#define calib_check_binary SCORE_CAT(SCORE_PREFIX, check_binary)
#define calib_check_gaussian SCORE_CAT(SCORE_PREFIX, check_gaussian)
#define calib_check_label SCORE_CAT(SCORE_PREFIX, check_label)
#define calib_check_logits SCORE_CAT(SCORE_PREFIX, check_logits)
#define calib_check_probs SCORE_CAT(SCORE_PREFIX, check_probs)
#define calib_row_max SCORE_CAT(SCORE_PREFIX, row_max)
#define calib_softmax_row SCORE_CAT(SCORE_PREFIX, softmax_row)
#define calib_softmax SCORE_CAT(SCORE_PREFIX, softmax)
#define calib_log_softmax_at SCORE_CAT(SCORE_PREFIX, log_softmax_at)
#define calib_argmax SCORE_CAT(SCORE_PREFIX, argmax)
#define calib_score_probs SCORE_CAT(SCORE_PREFIX, score_probs)
#define calib_score_logits SCORE_CAT(SCORE_PREFIX, score_logits)
#define calib_score_binary SCORE_CAT(SCORE_PREFIX, score_binary)
#define calib_score_dss SCORE_CAT(SCORE_PREFIX, score_dss)
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#include "../../src/lib/score.c"
#pragma GCC diagnostic warning "-Wmissing-prototypes"
#undef calib_check_binary
#undef calib_check_gaussian
#undef calib_check_label
#undef calib_check_logits
#undef calib_check_probs
#undef calib_row_max
#undef calib_softmax_row
#undef calib_softmax
#undef calib_log_softmax_at
#undef calib_argmax
#undef calib_score_probs
#undef calib_score_logits
#undef calib_score_binary
#undef calib_score_dss
