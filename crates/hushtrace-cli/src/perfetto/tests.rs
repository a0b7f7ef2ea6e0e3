use super::proto::*;
use prost::Message;

/// The hot path's field numbers are [`TrackEvent`]'s: bytes written with
/// `track_event_tag` decode as the message.
#[test]
fn track_event_tags_match_the_message() {
    use prost::encoding::{double, int32, int64, message, uint64};
    use track_event_tag as tag;
    let a = DebugAnnotation {
        name_iid: Some(3),
        string_value_iid: Some(4),
        ..Default::default()
    };
    let mut b = Vec::new();
    int32::encode(tag::TYPE, &TYPE_COUNTER, &mut b);
    uint64::encode(tag::TRACK_UUID, &9, &mut b);
    uint64::encode(tag::NAME_IID, &5, &mut b);
    uint64::encode(tag::CATEGORY_IIDS, &6, &mut b);
    int64::encode(tag::COUNTER_VALUE, &-7, &mut b);
    double::encode(tag::DOUBLE_COUNTER_VALUE, &0.5, &mut b);
    message::encode(tag::DEBUG_ANNOTATIONS, &a, &mut b);
    let te = TrackEvent::decode(&b[..]).unwrap();
    assert_eq!(
        te,
        TrackEvent {
            category_iids: vec![6],
            name_iid: Some(5),
            r#type: Some(TYPE_COUNTER),
            track_uuid: Some(9),
            counter_value: Some(-7),
            double_counter_value: Some(0.5),
            debug_annotations: vec![a],
        }
    );
    // And an EventPacket is a TracePacket.
    let p = EventPacket {
        timestamp: Some(1),
        trusted_packet_sequence_id: Some(2),
        track_event: Some(b),
        ..Default::default()
    };
    let tp = TracePacket::decode(&p.encode_to_vec()[..]).unwrap();
    assert_eq!(tp.track_event, Some(te));
    assert_eq!(
        (tp.timestamp, tp.trusted_packet_sequence_id),
        (Some(1), Some(2))
    );
}
