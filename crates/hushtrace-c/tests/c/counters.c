/* HT_COUNTER with values of every arithmetic type: integers record as int64 (signed) or uint64
 * (unsigned, _Bool), floating values as double, in C99 (GCC/Clang builtins) as in C11
 * (_Generic). The test builds it both ways and reads the values back with babeltrace2.
 * Usage: counters <dir> */
#include <hushtrace.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

int main(int argc, char **argv) {
    ht_session *s;
    ht_stats st;
    signed char sc = -3;
    unsigned char uc = 250;
    short sh = -300;
    int i = -5;
    unsigned u = 4000000000u;
    long l = -7000000000L;
    unsigned long long ull = 18446744073709551615ull;
    int64_t i64min = INT64_MIN;
    bool b = true;
    float f = 0.25f;
    double d = -2.5;
    enum { SEVEN = 7 } e = SEVEN;
    int n = 0;
    if (argc != 2) return 2;
    s = ht_session_start(argv[1]);
    if (s == NULL) {
        fprintf(stderr, "%s\n", ht_last_error());
        return 1;
    }
    HT_COUNTER("k", "schar", sc);
    HT_COUNTER("k", "uchar", uc);
    HT_COUNTER("k", "short", sh);
    HT_COUNTER("k", "int", i);
    HT_COUNTER("k", "unsigned", u);
    HT_COUNTER("k", "long", l);
    HT_COUNTER("k", "ull", ull);
    HT_COUNTER("k", "i64min", i64min);
    HT_COUNTER("k", "bool", b);
    HT_COUNTER("k", "float", f);
    HT_COUNTER("k", "double", d);
    HT_COUNTER("k", "enum", e);
    HT_COUNTER("k", "literal", 42);
    HT_COUNTER("k", "expr", i * 2 + 1);
    /* The value expression runs once. */
    HT_COUNTER("k", "once", ++n);
    HT_COUNTER("k", "once_after", n);
    if (ht_session_stop(s, &st) != 0) return 1;
    printf("written %llu discarded %llu\n", (unsigned long long)st.events_written,
           (unsigned long long)st.events_discarded);
    return 0;
}
