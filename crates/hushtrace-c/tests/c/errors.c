/* NULL and malformed arguments give an error code and a message, never a crash. Prints one
 * line per check; exits 1 if any check fails. Usage: errors <dir> */
#include <hushtrace.h>
#include <stdio.h>
#include <string.h>

static int failed;

static void check(const char *what, int ok) {
    const char *e = ht_last_error();
    printf("%s %s: %s\n", ok ? "ok" : "FAIL", what, e);
    if (!ok) failed = 1;
}

static int has_error(void) {
    const char *e = ht_last_error();
    return e != NULL && strlen(e) > 0;
}

int main(int argc, char **argv) {
    ht_session *s;
    ht_stats st;
    int r;
    if (argc != 2) return 2;
    check("no error yet", ht_last_error() != NULL && ht_last_error()[0] == '\0');
    check("start NULL", ht_session_start(NULL) == NULL && has_error());
    check("start empty", ht_session_start("") == NULL && has_error());
    check("start in /proc", ht_session_start("/proc/no/such/dir") == NULL && has_error());
    check("stop NULL", ht_session_stop(NULL, &st) == HT_ERR_INVALID && has_error());
    r = ht_enable(NULL);
    check("enable NULL", r == HT_ERR_INVALID && has_error());
    r = ht_disable(NULL);
    check("disable NULL", r == HT_ERR_INVALID && has_error());
    r = ht_enable("");
    check("enable empty", r == HT_ERR_INVALID && strstr(ht_last_error(), "empty") != NULL);
    r = ht_enable("bad\"glob");
    check("enable quote", r == HT_ERR_INVALID && strstr(ht_last_error(), "glob") != NULL);
    r = ht_disable("a:b:c");
    check("disable two colons", r == HT_ERR_INVALID && has_error());
    r = ht_enable("\xff\xfe");
    check("enable not UTF-8", r == HT_ERR_INVALID && strstr(ht_last_error(), "UTF-8") != NULL);
    ht_set_thread_name(NULL);
    check("thread name NULL", strstr(ht_last_error(), "NULL") != NULL);
    s = ht_session_start(argv[1]);
    check("start", s != NULL);
    if (s == NULL) return 1;
    check("second start", ht_session_start(argv[1]) == NULL && has_error());
    check("start_from_env while running", ht_start_from_env() < 0 && has_error());
    HT_EVENT("e", "strings", HT_STR("null", NULL), HT_STR("bad", "ok\xff tail"));
    r = ht_enable("e:*");
    check("enable e:* matched", r >= 1);
    r = ht_disable("nothing:matches");
    check("disable no match", r == 0);
    check("stop", ht_session_stop(s, NULL) == 0);
    return failed;
}
