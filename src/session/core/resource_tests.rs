//! A gateway's resource listings, read page by page from each server, against the scripted
//! servers of `tests.rs`: what a listing that does not arrive whole leaves of a server's claims,
//! and how much of a listing is read at all.

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
    let mut h = offering_resources();
    h.host(json!({"jsonrpc":"2.0","id":1,"method":"resources/list"}));
    let other = next_listing(&mut h, 1);
    page(&mut h, 1, &other, &[], None);
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
    assert!(count > 0 && pages <= 11, "{pages} pages, {count} items");
    // A cut listing replaces nothing: the flood's URIs claimed nothing.
    assert_eq!(
        h.router.resources.claimants("flood://1/1", &[], |_| true),
        Vec::<usize>::new()
    );
}
