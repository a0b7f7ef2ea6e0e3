/* ht_start_from_env() as the header describes it: prints its return value and the last error
 * ("<r> <message>"), records one event, and exits (a started session stops at exit()).
 * Usage: from_env, with or without HUSHTRACE_* variables. */
#include <hushtrace.h>
#include <stdio.h>

int main(void) {
    int r = ht_start_from_env();
    printf("%d %s\n", r, ht_last_error());
    HT_EVENT("env", "after");
    return 0;
}
