use super::*;

#[test]
fn a_field_missing_from_the_kernel_format_is_an_error_naming_it() {
    let class = &CLASSES[usize::from(crate::schema::id_of("sched_switch").unwrap())];
    // sched_switch of a kernel without `prev_state`, and with `next_pid` as text.
    let format = EventFormat::parse(
        "name: sched_switch\nID: 9\nformat:\n\
             \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
             \tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
             \tfield:char next_pid[4];\toffset:24;\tsize:4;\tsigned:0;\n",
    )
    .unwrap();
    let e = source_field(
        &format,
        (class.sys, class.ftrace, class.name),
        class.fields[3],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("sched:sched_switch") && e.contains("`prev_state`"),
        "{e}"
    );
    let e = source_field(
        &format,
        (class.sys, class.ftrace, class.name),
        class.fields[5],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("`next_pid`") && e.contains("not an integer"),
        "{e}"
    );
    assert_eq!(
        source_field(
            &format,
            (class.sys, class.ftrace, class.name),
            class.fields[0]
        )
        .unwrap()
        .name,
        "prev_comm"
    );
}
