// HT_SCOPE when its span is disabled or enabled while the scope is open: like the Rust span
// guard, the end is recorded if and only if the begin was (begins carry a field `k`, ends
// none). Usage: scope_toggle <dir>
#include <hushtrace.h>
#include <cstdio>
#include <cstdlib>

static void check(int rc) {
    if (rc < 0) {
        std::fprintf(stderr, "%s\n", ht_last_error());
        std::exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    ht_session *s = ht_session_start(argv[1]);
    if (s == nullptr) {
        std::fprintf(stderr, "%s\n", ht_last_error());
        return 1;
    }
    {
        // Enabled throughout: begin and end.
        HT_SCOPE("tog", "steady", HT_I64("k", 1));
    }
    {
        // Disabled while open: begin and end (the end is recorded anyway).
        HT_SCOPE("tog", "off_inside", HT_I64("k", 2));
        check(ht_disable("tog:off_inside"));
    }
    {
        // Recorded like the one before; leaves tog:on_inside disabled for the next.
        HT_SCOPE("tog", "on_inside", HT_I64("k", 3));
        check(ht_disable("tog:on_inside"));
    }
    {
        // Disabled at the begin, enabled while open: neither (no end without its begin).
        HT_SCOPE("tog", "on_inside", HT_I64("k", 4));
        check(ht_enable("tog:on_inside"));
    }
    {
        // Nested, everything disabled inside the inner scope: both ends, inner first.
        HT_SCOPE("tog", "outer", HT_I64("k", 5));
        HT_SCOPE("tog", "inner", HT_I64("k", 6));
        check(ht_disable("tog:*"));
    }
    {
        // Still disabled: nothing.
        HT_SCOPE("tog", "outer", HT_I64("k", 7));
    }
    check(ht_enable("tog:*"));
    {
        // Enabled again: begin and end.
        HT_SCOPE("tog", "off_inside", HT_I64("k", 8));
    }
    ht_stats st;
    if (ht_session_stop(s, &st) != 0) return 1;
    std::printf("written %llu discarded %llu\n",
                static_cast<unsigned long long>(st.events_written),
                static_cast<unsigned long long>(st.events_discarded));
    return 0;
}
