//! What the session loop reads of the requests in flight at the servers (whether to poll).

use super::*;

#[test]
fn only_the_hosts_requests_count_as_in_flight_at_the_servers() {
    let mut h = two();
    h.capabilities = vec![json!({"tools": {}, "logging": {}}); 2];
    h.initialize(json!({}));
    h.tool_names();
    assert_eq!(h.router.host_requests_at_servers(2), 0);
    // airlock sends each server a `logging/setLevel` of its own, which a server may never answer.
    h.host(
        json!({"jsonrpc":"2.0","id":"l","method":"logging/setLevel","params":{"level":"debug"}}),
    );
    let set_level = h.received[0].pop_front().unwrap();
    assert_eq!(set_level["method"], "logging/setLevel", "{set_level}");
    assert_eq!(
        h.router.host_requests_at_servers(2),
        0,
        "airlock's own requests do not count"
    );
    h.host(call(json!(1), "alpha__read"));
    assert_eq!(h.router.host_requests_at_servers(2), 1);
    h.host(call(json!(2), "beta__read"));
    assert_eq!(h.router.host_requests_at_servers(2), 2);
    assert_eq!(
        h.router.host_requests_at_servers(1),
        1,
        "counted up to at_most"
    );
    let at_alpha = h.received[0].pop_front().unwrap();
    h.answer(
        0,
        json!({"jsonrpc":"2.0","id":at_alpha["id"],"result":{"content":[]}}),
    );
    assert_eq!(h.router.host_requests_at_servers(2), 1, "answered: gone");
}
