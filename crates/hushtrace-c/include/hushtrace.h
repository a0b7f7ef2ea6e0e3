/*
 * hushtrace.h - C and C++ interface of hushtrace, a userspace tracer safe for hard real-time
 * threads (no-syscall mode) and correct across fork().
 *
 * Link with libhushtrace.so or libhushtrace.a:  cc app.c $(pkg-config --cflags --libs hushtrace)
 * C99 or later, C++11 or later (HT_SCOPE needs C++); GCC or Clang on Linux.
 *
 *   ht_session *s = ht_session_start("/tmp/trace");
 *   HT_EVENT("app", "started", HT_I64("version", 3), HT_STR("mode", "fast"));
 *   HT_SPAN_BEGIN("app", "work", HT_U64("items", 10));
 *   HT_COUNTER("app", "queue_depth", 7);
 *   HT_SPAN_END("app", "work");
 *   ht_stats st; ht_session_stop(s, &st);
 *
 * Tracepoints. Every HT_EVENT / HT_SPAN_BEGIN / HT_SPAN_END / HT_COUNTER / HT_SCOPE has a
 * static descriptor (category, name, field names and types) placed, through a pointer, in the
 * ELF section `hushtrace_cs` of its module (executable or shared library). A constructor that
 * this header adds to every module registers the module's descriptors before main() runs, or,
 * for a library loaded with dlopen(), before dlopen() returns: so every tracepoint is listed in
 * the trace metadata without being run, and its hot path does no registration work. A
 * disabled tracepoint costs one relaxed load of the descriptor's own interest word and a
 * branch; field expressions are evaluated only when it is enabled. An enabled one makes no
 * system call and does not allocate on a thread in no-syscall mode, and is safe in signal
 * handlers (call ht_init_thread() on the thread first).
 *
 * Category, name and field names are string literals; field names are C identifiers. At most
 * 8 fields. Strings are copied (at most 255 bytes, cut at a UTF-8 character boundary; bytes
 * that are not UTF-8 end the string; NULL records "").
 *
 * dlclose(): a library with tracepoints stays loaded. Its registration pins it
 * (RTLD_NODELETE), because the tracer keeps using its descriptors (enable/disable, metadata);
 * dlclose() then only drops the reference, and a later dlopen() of the same library finds it
 * loaded with its callsites registered.
 *
 * One tracer per process: link either the shared or the static library, in every module.
 */
#ifndef HUSHTRACE_H
#define HUSHTRACE_H

#include <stddef.h>
#include <stdint.h>

#if !defined(__GNUC__)
#error "hushtrace.h needs GCC or Clang (ELF sections, constructors, __atomic builtins)"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------- */
/* Sessions and threads                                                                     */
/* ---------------------------------------------------------------------------------------- */

/** A running session (opaque). */
typedef struct ht_session ht_session;

/** What a stopped session wrote and lost. */
typedef struct {
    uint64_t events_written;
    uint64_t events_discarded;
} ht_stats;

/** Error codes: every int-returning function returns a negative one on failure, and
 *  ht_last_error() says why. */
#define HT_ERR_INVALID (-1) /* a NULL or malformed argument */
#define HT_ERR_FAILED (-2)  /* the runtime refused (configuration, I/O, already running...) */
#define HT_ERR_PANIC (-3)   /* an internal error (a bug: please report it) */

/** Starts a session writing a CTF trace under `dir` (created if needed; must belong to the
 *  user and not be writable by others), with the default ring sizes. NULL on error. Like
 *  `hushtrace record` without --force or --append, it refuses a directory that already holds
 *  a trace of other processes (ht_last_error() says "already holds a trace"): use a new
 *  directory, remove the old trace, or ht_session_append(). A directory this process wrote a
 *  session to before is accepted (each session gets its own <pid>.<n> directory). Of two
 *  threads starting at once, one gets the session and the other NULL ("already running"),
 *  having created nothing. */
ht_session *ht_session_start(const char *dir);

/** Like ht_session_start(), but adds this process's trace to a directory that already holds
 *  a trace (as `hushtrace record --append`). */
ht_session *ht_session_append(const char *dir);

/** Stops the session: writes every packet, the metadata and the statistics. Fills `*out`
 *  when `out` is not NULL. 0 on success. A handle stays valid after the stop (its few bytes
 *  are never freed): stopping it again, or passing a pointer that is not a session handle,
 *  returns HT_ERR_INVALID ("stopped already", "not a session handle"), in every build. */
int ht_session_stop(ht_session *s, ht_stats *out);

/** Starts a session when HUSHTRACE_OUTPUT=<dir> is set, configured by HUSHTRACE_MODE,
 *  HUSHTRACE_SUBBUF_SIZE, HUSHTRACE_NUM_SUBBUFS, HUSHTRACE_READ_TIMER_MS, HUSHTRACE_DIRECT_IO,
 *  HUSHTRACE_CONSUMER_SCHED, HUSHTRACE_CONSUMER_CPUS, HUSHTRACE_NO_SYSCALL_POLICY and the
 *  other HUSHTRACE_* variables of the README's table. 0 started (it stops at exit()); 1 when
 *  none of the table's variables is set (nothing to do; an empty value counts as unset);
 *  negative on error (HT_ERR_FAILED for a bad value, or another of them set without
 *  HUSHTRACE_OUTPUT; ht_last_error() names it). */
int ht_start_from_env(void);

/** The message of the calling thread's last failed call ("" if none). Valid until the next
 *  failed call on this thread. */
const char *ht_last_error(void);

/** Registers the thread and caches its identity (vpid, vtid, procname) and, if a session
 *  runs, allocates its buffer. Call it before a thread's signal handlers trace. */
void ht_init_thread(void);

/** Enters no-syscall mode: from now on no tracepoint on this thread makes a system call or
 *  allocates. Does all of ht_init_thread() and faults in (and mlocks) the thread's buffer.
 *  0, or negative when the promise cannot be kept (the ring cannot be allocated or locked). */
int ht_set_thread_no_syscall(void);

/** Leaves no-syscall mode. */
void ht_clear_thread_no_syscall(void);

/** Renames the calling thread (at most 15 bytes) and updates the cached procname. NULL sets
 *  the last error and changes nothing. */
void ht_set_thread_name(const char *name);

/** Enables / disables every tracepoint whose "category:name" matches the glob (`*`, `?`),
 *  now and registered later. Returns how many matched now (>= 0), or a negative error for a
 *  NULL, empty, non-UTF-8 or malformed glob (control characters, quotes, backslashes). */
int ht_enable(const char *glob);
int ht_disable(const char *glob);

/* ---------------------------------------------------------------------------------------- */
/* Verification (what hushtrace's own tests use to prove no-syscall mode with the kernel)   */
/* ---------------------------------------------------------------------------------------- */

/** Installs on the calling thread a seccomp filter that traps every system call except exit,
 *  exit_group and rt_sigreturn (a trapped call returns -ENOSYS and is counted). Irreversible:
 *  end the thread with ht_verify_exit_thread(). Linux x86_64/aarch64. 0 or negative. */
int ht_verify_trap_syscalls_on_this_thread(void);

/** System calls trapped so far (process-wide). */
uint64_t ht_verify_trapped_syscalls(void);

/** Ends the calling thread with a raw exit system call (allowed by the filter); the thread
 *  can be joined with pthread_join(). No cleanup handler or destructor runs and the thread's
 *  stack is released: nothing on it may still be in use by another thread. */
void ht_verify_exit_thread(void) __attribute__((noreturn));

/* ---------------------------------------------------------------------------------------- */
/* Tracepoints                                                                              */
/* ---------------------------------------------------------------------------------------- */

/* HT_EVENT("cat", "name", fields...)      an instant event, 0 to 8 fields
 * HT_SPAN_BEGIN("cat", "name", fields...) the start of a span
 * HT_SPAN_END("cat", "name")              its end (on the same thread)
 * HT_SPAN_END_DEADLINE("cat", "name", deadline_ns)
 *                                         its end, for a span with a deadline: when the span
 *                                         ends more than deadline_ns (a uint64_t, > 0,
 *                                         evaluated once, on its first enabled hit) after its
 *                                         begin, its thread records a `hushtrace:late` event
 *                                         and the session writes a capture into
 *                                         <dir>/late/<n>/ with a line in <dir>/late/index.json
 *                                         (as Rust's span!(deadline = ...)). The session's
 *                                         rules (HUSHTRACE_ON_LATE, `hushtrace record
 *                                         --on-late`) give spans a deadline without a code
 *                                         change, HT_SPAN_END's and HT_SCOPE's included, and
 *                                         win over this one. The check at the end is one
 *                                         compare; a late span costs a few stores, no system
 *                                         call, lock or allocation. A span's end finds its
 *                                         begin's timestamp on a per-thread stack of the
 *                                         innermost 64 open spans: an end whose begin is not
 *                                         the innermost open span of its category and name
 *                                         (a begin recorded while its end was disabled, say)
 *                                         is not checked.
 * HT_COUNTER("cat", "name", value)        a counter sample, one field `value`: int64 for a
 *                                         signed integer, uint64 for an unsigned one (and
 *                                         _Bool), double for a floating value; by _Generic in
 *                                         C11, templates in C++, GCC/Clang builtins in C99
 * HT_SCOPE("cat", "name", fields...)      C++: a span that ends at scope exit
 * Fields: */
#define HT_I64(name, v) (8, name, ht__v_i64(v))
#define HT_U64(name, v) (4, name, ht__v_u64(v))
#define HT_I32(name, v) (7, name, ht__v_i64((int32_t)(v)))
#define HT_U32(name, v) (3, name, ht__v_u64((uint32_t)(v)))
#define HT_F64(name, v) (9, name, ht__v_f64(v))
#define HT_BOOL(name, v) (10, name, ht__v_bool((v) ? 1 : 0))
#define HT_STR(name, v) (11, name, ht__v_str(v))

#define HT_EVENT(...) HT__CAT(HT__TP_, HT__NARG(__VA_ARGS__))((void)0, 0, __VA_ARGS__)
#define HT_SPAN_BEGIN(...) HT__CAT(HT__TP_, HT__NARG(__VA_ARGS__))((void)0, 1, __VA_ARGS__)
#define HT_SPAN_END(cat, name) HT__TP_2((void)0, 2, cat, name)
#define HT_SPAN_END_DEADLINE(cat, name, deadline_ns)                                           \
    do {                                                                                       \
        HT__DESC(ht__cs, 2, cat, name, 0, 0, 0);                                               \
        if (HT__ENABLED(ht__cs)) {                                                             \
            static int ht__declared = 0;                                                       \
            if (!__atomic_load_n(&ht__declared, __ATOMIC_RELAXED)) {                           \
                ht__span_deadline(&ht__cs, (uint64_t)(deadline_ns));                           \
                __atomic_store_n(&ht__declared, 1, __ATOMIC_RELAXED);                          \
            }                                                                                  \
            HT__RECORD(ht__cs, ht__v_u64(0), ht__v_u64(0));                                    \
        }                                                                                      \
    } while (0)
#define HT_COUNTER(cat, name, value)                                                           \
    HT__TP_3((void)0, 3, cat, name,                                                            \
             (HT__COUNTER_TYPE(value), "value", HT__COUNTER_VALUE(value)))

/* ---------------------------------------------------------------------------------------- */
/* Implementation (not API)                                                                 */
/* ---------------------------------------------------------------------------------------- */

#define HT__ABI 2u
#define HT__MAX_FIELDS 8

/* The runtime's per-callsite state (hushtrace_core::CallsiteState, #[repr(C)]): all zero
 * until registered (disabled). Only the runtime writes it. */
typedef struct ht__callsite_state {
    uint64_t interest; /* 0: disabled; the one word a tracepoint loads */
    uint64_t signature_;
    uint16_t id_;
    uint8_t registered_;
} ht__callsite_state;

typedef union ht__value {
    int64_t i;
    uint64_t u;
    double f;
    const char *s;
} ht__value;

struct ht__callsite;
/* Records one event of a descriptor with 0 to 2 fields (unused values are ignored), if it is
 * enabled: the library's code for the descriptor's field types, found at registration. */
typedef void (*ht__record_fn)(const struct ht__callsite *cs, ht__value a, ht__value b);

/* The static descriptor of one tracepoint. */
typedef struct ht__callsite {
    ht__callsite_state state;
    uint32_t abi;
    uint8_t kind; /* 0 instant, 1 span begin, 2 span end, 3 counter */
    uint8_t nfields;
    const char *category;
    const char *name;
    const char *const *field_names;
    const uint8_t *field_types; /* hushtrace FieldType codes */
    const char *file;
    uint32_t line;
    /* Set by registration, in this order: */
    void *runtime_;
    void *callsite_;
    ht__record_fn record; /* 0 to 2 fields: what the tracepoint calls */
} ht__callsite;

void ht__record(ht__callsite *cs, const ht__value *values);
void ht__scope_end(ht__callsite *end);
void ht__span_deadline(const ht__callsite *end, uint64_t deadline_ns);
void ht__register_module(ht__callsite *const *start, ht__callsite *const *stop);
void ht__register_callsite(ht__callsite *cs);

static inline ht__value ht__v_i64(int64_t x) { ht__value v; v.i = x; return v; }
static inline ht__value ht__v_u64(uint64_t x) { ht__value v; v.u = x; return v; }
static inline ht__value ht__v_f64(double x) { ht__value v; v.f = x; return v; }
static inline ht__value ht__v_bool(int x) { ht__value v; v.u = (uint64_t)x; return v; }
static inline ht__value ht__v_str(const char *x) { ht__value v; v.s = x; return v; }

/* This module's descriptor pointers (weak: NULL in a module without tracepoints). */
extern ht__callsite *const __start_hushtrace_cs[] __attribute__((weak, visibility("hidden")));
extern ht__callsite *const __stop_hushtrace_cs[] __attribute__((weak, visibility("hidden")));
/* One flag per module, so the first constructor of the module registers it. */
__attribute__((weak, visibility("hidden"))) int ht__module_registered = 0;

__attribute__((constructor, unused)) static void ht__register_this_module(void) {
    if (!ht__module_registered) {
        ht__module_registered = 1;
        ht__register_module(__start_hushtrace_cs, __stop_hushtrace_cs);
    }
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#define HT__CAT(a, b) HT__CAT_(a, b)
#define HT__CAT_(a, b) a##b
#define HT__UNPAREN(...) __VA_ARGS__
#define HT__NARG(...) HT__NARG_(__VA_ARGS__, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define HT__NARG_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, N, ...) N

/* A field is (type, "name", value); these pick one part. */
#define HT__F_TYPE(t, n, v) t
#define HT__F_NAME(t, n, v) n
#define HT__F_VAL(t, n, v) v
#define HT__AP(m, f) m f
#define HT__M1(m, a) HT__AP(m, a)
#define HT__M2(m, a, ...) HT__AP(m, a), HT__M1(m, __VA_ARGS__)
#define HT__M3(m, a, ...) HT__AP(m, a), HT__M2(m, __VA_ARGS__)
#define HT__M4(m, a, ...) HT__AP(m, a), HT__M3(m, __VA_ARGS__)
#define HT__M5(m, a, ...) HT__AP(m, a), HT__M4(m, __VA_ARGS__)
#define HT__M6(m, a, ...) HT__AP(m, a), HT__M5(m, __VA_ARGS__)
#define HT__M7(m, a, ...) HT__AP(m, a), HT__M6(m, __VA_ARGS__)
#define HT__M8(m, a, ...) HT__AP(m, a), HT__M7(m, __VA_ARGS__)

#define HT__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HT__LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define HT__ENABLED(cs) HT__UNLIKELY(HT__LOAD(&(cs).state.interest) != 0)

/* Declares the descriptor `var` in the current block and arranges its registration at load
 * time: in C a pointer to it in the module's `hushtrace_cs` section (registered by the
 * module's constructor); in C++ (where a static in an inline function or template lives in a
 * COMDAT group and cannot share a named section with the others) a template static member
 * whose dynamic initialization, run with the module's static constructors, registers it. */
#ifdef __cplusplus
#define HT__DESC(var, kind, cat, name, n, names, types)                                        \
    static ht__callsite var = {{0, 0, 0, 0}, HT__ABI, (kind), (n), cat "", name "", names,        \
                               types, __FILE__, __LINE__, nullptr, nullptr, nullptr};          \
    struct var##_get {                                                                         \
        static ht__callsite *get() { return &var; }                                            \
    };                                                                                         \
    (void)&ht_detail::autoreg<var##_get>::token
#else
#define HT__DESC(var, kind, cat, name, n, names, types)                                        \
    static ht__callsite var = {{0, 0, 0, 0}, HT__ABI, (kind), (n), cat "", name "", names,        \
                               types, __FILE__, __LINE__, 0, 0, 0};                            \
    __attribute__((section("hushtrace_cs"), used)) static ht__callsite *const var##_entry = &var
#endif

/* The tracepoints. HT__TP_<number of macro arguments>(then, kind, cat, name, fields...):
 * `then` is a statement run when the tracepoint is enabled (HT_SCOPE notes that its begin was
 * recorded). With 0 to 2 fields the enabled path calls the descriptor's recorder with the
 * values in registers (no array, no dispatch on the field types: the recorder is the
 * library's code for exactly these types); with more, ht__record with an array. */
#define HT__RECORD(cs, ...)                                                                    \
    do {                                                                                       \
        /* NULL until registered; registration stores it last (release). */                   \
        ht__record_fn ht__f = __atomic_load_n(&(cs).record, __ATOMIC_ACQUIRE);                 \
        if (ht__f) ht__f(&(cs), __VA_ARGS__);                                                  \
    } while (0)

#define HT__TP_2(then, kind, cat, name)                                                        \
    do {                                                                                       \
        HT__DESC(ht__cs, kind, cat, name, 0, 0, 0);                                            \
        if (HT__ENABLED(ht__cs)) {                                                             \
            HT__RECORD(ht__cs, ht__v_u64(0), ht__v_u64(0));                                    \
            then;                                                                              \
        }                                                                                      \
    } while (0)

#define HT__TP_R(then, kind, cat, name, n, vals, ...)                                          \
    do {                                                                                       \
        static const char *const ht__names[] = {HT__M##n(HT__F_NAME, __VA_ARGS__)};            \
        static const uint8_t ht__types[] = {HT__M##n(HT__F_TYPE, __VA_ARGS__)};                \
        HT__DESC(ht__cs, kind, cat, name, n, ht__names, ht__types);                            \
        if (HT__ENABLED(ht__cs)) {                                                             \
            HT__RECORD(ht__cs, HT__UNPAREN vals);                                              \
            then;                                                                              \
        }                                                                                      \
    } while (0)

#define HT__TP_N(then, kind, cat, name, n, ...)                                                \
    do {                                                                                       \
        static const char *const ht__names[] = {HT__M##n(HT__F_NAME, __VA_ARGS__)};            \
        static const uint8_t ht__types[] = {HT__M##n(HT__F_TYPE, __VA_ARGS__)};                \
        HT__DESC(ht__cs, kind, cat, name, n, ht__names, ht__types);                            \
        if (HT__ENABLED(ht__cs)) {                                                             \
            const ht__value ht__vals[] = {HT__M##n(HT__F_VAL, __VA_ARGS__)};                   \
            ht__record(&ht__cs, ht__vals);                                                     \
            then;                                                                              \
        }                                                                                      \
    } while (0)

#define HT__TP_3(t, k, c, n, a) HT__TP_R(t, k, c, n, 1, (HT__F_VAL a, ht__v_u64(0)), a)
#define HT__TP_4(t, k, c, n, a, b) HT__TP_R(t, k, c, n, 2, (HT__F_VAL a, HT__F_VAL b), a, b)
#define HT__TP_5(t, k, c, n, ...) HT__TP_N(t, k, c, n, 3, __VA_ARGS__)
#define HT__TP_6(t, k, c, n, ...) HT__TP_N(t, k, c, n, 4, __VA_ARGS__)
#define HT__TP_7(t, k, c, n, ...) HT__TP_N(t, k, c, n, 5, __VA_ARGS__)
#define HT__TP_8(t, k, c, n, ...) HT__TP_N(t, k, c, n, 6, __VA_ARGS__)
#define HT__TP_9(t, k, c, n, ...) HT__TP_N(t, k, c, n, 7, __VA_ARGS__)
#define HT__TP_10(t, k, c, n, ...) HT__TP_N(t, k, c, n, 8, __VA_ARGS__)

/* Counter value types; C++ scopes. */
#if defined(__cplusplus)
#include <type_traits>
namespace ht_detail {
/* Registers Get::get() when the module's static constructors run (see HT__DESC). */
template <typename Get>
struct autoreg {
    static const int token;
};
template <typename Get>
const int autoreg<Get>::token = (ht__register_callsite(Get::get()), 0);

template <typename T>
constexpr uint8_t counter_type() {
    return std::is_floating_point<T>::value ? 9 : (std::is_signed<T>::value ? 8 : 4);
}
template <typename T>
inline ht__value counter_value(T v) {
    return std::is_floating_point<T>::value
               ? ht__v_f64(static_cast<double>(v))
               : (std::is_signed<T>::value ? ht__v_i64(static_cast<int64_t>(v))
                                           : ht__v_u64(static_cast<uint64_t>(v)));
}

/* The guard of HT_SCOPE: records the span's end when it leaves its scope if its begin was
 * recorded (`end` is NULL otherwise), also if the span was disabled in between, as the Rust
 * span guard does: begins and ends stay balanced. */
class scope_guard {
  public:
    explicit scope_guard(ht__callsite *end) noexcept : end_(end) {}
    scope_guard(const scope_guard &) = delete;
    scope_guard &operator=(const scope_guard &) = delete;
    ~scope_guard() {
        if (end_ != nullptr) ht__scope_end(end_);
    }

  private:
    ht__callsite *end_;
};
} // namespace ht_detail
#define HT__COUNTER_TYPE(v) ht_detail::counter_type<typename std::decay<decltype(v)>::type>()
#define HT__COUNTER_VALUE(v) ht_detail::counter_value(v)

#define HT_SCOPE(...) HT__SCOPE_(HT__CAT(ht__scope_, __COUNTER__), __VA_ARGS__)
#define HT__SCOPE_(var, cat, ...)                                                              \
    ht_detail::scope_guard var([&]() -> ht__callsite * {                                       \
        HT__DESC(ht__end, 2, cat, HT__FIRST(__VA_ARGS__), 0, nullptr, nullptr);                \
        bool ht__begun = false;                                                                \
        HT__CAT(HT__TP_, HT__NARG(cat, __VA_ARGS__))(ht__begun = true, 1, cat, __VA_ARGS__);   \
        return ht__begun ? &ht__end : nullptr;                                                 \
    }())
#define HT__FIRST(...) HT__FIRST_(__VA_ARGS__, ~)
#define HT__FIRST_(a, ...) a

#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define HT__COUNTER_TYPE(v)                                                                    \
    _Generic((v), float: 9, double: 9, long double: 9, unsigned char: 4, unsigned short: 4,    \
             unsigned int: 4, unsigned long: 4, unsigned long long: 4, _Bool: 4, default: 8)
#define HT__COUNTER_VALUE(v)                                                                   \
    _Generic((v), float: ht__v_f64, double: ht__v_f64, long double: ht__v_f64,                 \
             unsigned char: ht__v_u64, unsigned short: ht__v_u64, unsigned int: ht__v_u64,     \
             unsigned long: ht__v_u64, unsigned long long: ht__v_u64, _Bool: ht__v_u64,        \
             default: ht__v_i64)(v)
#else
/* C99: the same mapping with GCC/Clang builtins (this header needs one of them anyway):
 * __builtin_classify_type is 8 for a floating type, and an integer type is signed when
 * (T)-1 is negative. The condition is a constant, and `v` is evaluated once. */
#define HT__COUNTER_FLOAT(v) (__builtin_classify_type(v) == 8)
#define HT__COUNTER_SIGNED(v) ((__typeof__(v))-1 < 1)
#define HT__COUNTER_TYPE(v) (HT__COUNTER_FLOAT(v) ? 9 : HT__COUNTER_SIGNED(v) ? 8 : 4)
#define HT__COUNTER_VALUE(v)                                                                   \
    (HT__COUNTER_FLOAT(v)    ? ht__v_f64((double)(v))                                          \
     : HT__COUNTER_SIGNED(v) ? ht__v_i64((int64_t)(v))                                         \
                             : ht__v_u64((uint64_t)(v)))
#endif

#endif /* HUSHTRACE_H */
