/* Compiles every macro with 0..8 fields: the header must be clean under
 * -Wall -Wextra -Werror -pedantic as C99/C11 and, renamed, as C++17. */
#include <hushtrace.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

int header_check(int x, const char *s);
int header_check(int x, const char *s) {
    HT_EVENT("h", "f0");
    HT_EVENT("h", "f1", HT_I64("a", x));
    HT_EVENT("h", "f2", HT_I64("a", x), HT_U64("b", 2));
    HT_EVENT("h", "f3", HT_I64("a", x), HT_U64("b", 2), HT_F64("c", 0.5));
    HT_EVENT("h", "f4", HT_I64("a", x), HT_U64("b", 2), HT_F64("c", 0.5), HT_BOOL("d", true));
    HT_EVENT("h", "f5", HT_I64("a", x), HT_U64("b", 2), HT_F64("c", 0.5), HT_BOOL("d", true),
             HT_STR("e", s));
    HT_EVENT("h", "f6", HT_I64("a", x), HT_U64("b", 2), HT_F64("c", 0.5), HT_BOOL("d", true),
             HT_STR("e", s), HT_I32("f", -1));
    HT_EVENT("h", "f7", HT_I64("a", x), HT_U64("b", 2), HT_F64("c", 0.5), HT_BOOL("d", true),
             HT_STR("e", s), HT_I32("f", -1), HT_U32("g", 7u));
    HT_EVENT("h", "f8", HT_I64("a", x), HT_U64("b", 2), HT_F64("c", 0.5), HT_BOOL("d", true),
             HT_STR("e", s), HT_I32("f", -1), HT_U32("g", 7u), HT_I64("h", 9));
    HT_SPAN_BEGIN("h", "span");
    HT_SPAN_BEGIN("h", "span2", HT_U64("items", 3), HT_STR("who", s));
    HT_COUNTER("h", "count", x);
    HT_COUNTER("h", "countf", 0.25);
    HT_SPAN_END("h", "span2");
    HT_SPAN_END("h", "span");
    if (x) HT_EVENT("h", "if"); else HT_EVENT("h", "else");
#ifdef __cplusplus
    {
        HT_SCOPE("h", "scope");
        HT_SCOPE("h", "scope2", HT_I64("x", x));
    }
#endif
    return 0;
}
