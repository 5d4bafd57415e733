//! A gateway's listings, read page by page from each server, against the scripted servers of
//! `tests.rs`: what a resource listing that does not arrive whole leaves of a server's claims,
//! how much of a listing is read at all, and a change announced while airlock lists.

use serde_json::{Value, json};

use super::*;

/// `two()` whose servers both offer resources.
fn offering_resources() -> Harness {
    let mut h = two();
    h.capabilities = vec![json!({"tools": {}, "resources": {}}); 2];
    h.initialize(json!({}));
    h
}

/// The next `resources/list` request the server of `index` received.
fn next_listing(h: &mut Harness, index: usize) -> Value {
    let position = h.received[index]
        .iter()
        .position(|m| m["method"] == "resources/list")
        .unwrap_or_else(|| panic!("no resources/list at {index}: {:?}", h.received[index]));
    h.received[index].remove(position).unwrap()
}

fn page(h: &mut Harness, index: usize, request: &Value, uris: &[&str], next: Option<&str>) {
    let resources: Vec<Value> = uris
        .iter()
        .map(|uri| json!({"uri": uri, "name": uri}))
        .collect();
    let mut result = json!({"resources": resources});
    if let Some(next) = next {
        result["nextCursor"] = json!(next);
    }
    h.answer(
        index,
        json!({"jsonrpc":"2.0","id":request["id"],"result":result}),
    );
}

/// Alpha's whole listing (`keep://x`) was read; the host lists again (id 1), beta has answered,
/// and alpha's first page is asked for.
fn listed_keep_x_then_listing_again() -> Harness {
    let mut h = offering_resources();
    h.host(json!({"jsonrpc":"2.0","id":0,"method":"resources/list"}));
    let (first, other) = (next_listing(&mut h, 0), next_listing(&mut h, 1));
    page(&mut h, 0, &first, &["keep://x"], None);
    page(&mut h, 1, &other, &[], None);
    h.take_host(json!(0));
    h.host(json!({"jsonrpc":"2.0","id":1,"method":"resources/list"}));
    let other = next_listing(&mut h, 1);
    page(&mut h, 1, &other, &[], None);
    h
}

#[test]
fn a_listing_that_fails_part_way_keeps_what_the_server_claimed() {
    let mut h = offering_resources();
    h.host(json!({"jsonrpc":"2.0","id":1,"method":"resources/list"}));
    let (first, other) = (next_listing(&mut h, 0), next_listing(&mut h, 1));
    page(&mut h, 0, &first, &["notes://a"], Some("2"));
    let second = next_listing(&mut h, 0);
    page(&mut h, 0, &second, &["notes://b"], None);
    page(&mut h, 1, &other, &[], None);
    assert_eq!(
        h.take_host(json!(1))["result"]["resources"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // Listed again: its second page fails this time.
    h.host(json!({"jsonrpc":"2.0","id":2,"method":"resources/list"}));
    let (first, other) = (next_listing(&mut h, 0), next_listing(&mut h, 1));
    page(&mut h, 0, &first, &["notes://a"], Some("2"));
    let second = next_listing(&mut h, 0);
    h.answer(
        0,
        json!({"jsonrpc":"2.0","id":second["id"],"error":{"code":-32603,"message":"busy"}}),
    );
    page(&mut h, 1, &other, &[], None);
    h.take_host(json!(2));
    // notes://b is still alpha's: not "no server owns it", which two servers offering
    // resources would otherwise make it.
    h.host(json!({"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"notes://b"}}));
    let read = h.received[0].pop_back().unwrap();
    assert_eq!(read["method"], "resources/read", "{read}");
}

#[test]
fn a_server_that_pages_without_end_is_read_up_to_a_bound() {
    let mut h = listed_keep_x_then_listing_again();
    let mut pages = 0;
    while let Some(position) = h.received[0]
        .iter()
        .position(|m| m["method"] == "resources/list")
    {
        let request = h.received[0].remove(position).unwrap();
        pages += 1;
        assert!(pages <= 20, "still paging after {pages} pages");
        let uris: Vec<String> = (0..1000).map(|n| format!("flood://{pages}/{n}")).collect();
        let uris: Vec<&str> = uris.iter().map(String::as_str).collect();
        page(&mut h, 0, &request, &uris, Some("more"));
    }
    let listed = h.take_host(json!(1));
    let count = listed["result"]["resources"].as_array().map_or(0, Vec::len);
    // (airlock pages its own answer: the host reads the rest with airlock's cursor)
    assert!(pages == 11 && count > 0, "{pages} pages, {count} items");
    // A cut listing adds what it read to alpha's claims and gives up none of them.
    let claimants = |uri: &str| h.router.resources.claimants(uri, &[], |_| true);
    assert_eq!(claimants("flood://1/1"), vec![0]);
    // (its claims are bounded too: keep://x and 9,999 of these)
    assert_eq!(claimants("flood://10/998"), vec![0]);
    assert_eq!(claimants("flood://11/0"), Vec::<usize>::new());
    assert_eq!(claimants("keep://x"), vec![0]);
}

#[test]
fn airlocks_own_listing_of_a_servers_tools_is_read_up_to_a_bound() {
    let mut h = offering_resources();
    let server = &mut h.router.servers[0];
    server.start_listing();
    let tools: Vec<Value> = (0..1000)
        .map(|n| json!({"name": format!("t{n}")}))
        .collect();
    let page = json!({"tools": tools, "nextCursor": "more"});
    let pages_read = (1..=20)
        .find(|_| server.listing_past_bounds(&page).is_some())
        .unwrap();
    assert_eq!(pages_read, 11);
    // A new listing starts counting again.
    server.start_listing();
    assert!(server.listing_past_bounds(&page).is_none());
}

#[test]
fn a_last_page_past_the_bound_does_not_make_the_listing_whole() {
    let mut h = listed_keep_x_then_listing_again();
    // 9,500 items, then a last page (no cursor) of 1,000: it does not all fit.
    let uris: Vec<String> = (0..9_500).map(|n| format!("a://{n}")).collect();
    let request = next_listing(&mut h, 0);
    let uris: Vec<&str> = uris.iter().map(String::as_str).collect();
    page(&mut h, 0, &request, &uris, Some("last"));
    let tail: Vec<String> = (0..1_000).map(|n| format!("b://{n}")).collect();
    let tail: Vec<&str> = tail.iter().map(String::as_str).collect();
    let request = next_listing(&mut h, 0);
    page(&mut h, 0, &request, &tail, None);
    h.take_host(json!(1));
    // Cut, so not a whole listing: keep://x, which it no longer lists, is still its.
    assert_eq!(
        h.router.resources.claimants("keep://x", &[], |_| true),
        vec![0]
    );
}

#[test]
fn a_list_changed_during_airlocks_own_listing_lists_again_when_it_ends() {
    let mut h = two();
    h.initialize(json!({}));
    h.tool_names();
    // A listing of alpha's is under way when alpha says its tools changed again.
    h.router.servers[0].start_listing();
    h.tools[0] = vec!["read", "write", "fresh"];
    h.answer(
        0,
        json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"}),
    );
    assert!(h.router.servers[0].relist_after);
    // That listing ends (its pages from before the change): alpha is listed again at once.
    let tools = vec![json!({"name": "read"}), json!({"name": "write"})];
    h.router.servers[0].listing = None;
    h.router.tools_listed(0, tools, h.now);
    h.drive();
    assert!(h.tool_names().contains(&"alpha__fresh".to_string()));
    assert!(!h.router.servers[0].relist_after);
}
