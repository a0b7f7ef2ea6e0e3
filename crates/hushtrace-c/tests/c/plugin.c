/* A shared library the dlopen test loads after the session started. */
#include <hushtrace.h>

int plugin_run(int n) {
    int i;
    for (i = 0; i < n; i++) HT_EVENT("plugin", "hit", HT_I64("n", i), HT_STR("from", "plugin"));
    return n;
}

void plugin_never_called(void) { HT_EVENT("plugin", "never", HT_U64("x", 1)); }
