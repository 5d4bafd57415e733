//! A minimal DNS message codec: what the sandbox's resolver needs and nothing else.
//!
//! It reads one query (one question, no name compression in it, additional records such as
//! EDNS's OPT ignored) and writes one answer: at most one A record, pointing back at the question
//! name. Hand-written rather than a DNS crate because the subset is small enough to read in one
//! sitting (about 200 lines), every byte of it comes from an untrusted server, and it is
//! property-tested and fuzzed (`fuzz/fuzz_targets/dns_query.rs`) for panics and for answers that
//! always parse back.

use std::net::Ipv4Addr;

pub const TYPE_A: u16 = 1;
pub const TYPE_AAAA: u16 = 28;
pub const CLASS_IN: u16 = 1;

const HEADER_LEN: usize = 12;
const MAX_NAME_LEN: usize = 255;
const FLAG_QR: u16 = 0x8000;
const FLAG_AA: u16 = 0x0400;
const FLAG_RD: u16 = 0x0100;
const FLAG_RA: u16 = 0x0080;
const OPCODE_MASK: u16 = 0x7800;

/// Response codes airlock answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rcode {
    NoError = 0,
    FormErr = 1,
    ServFail = 2,
    NxDomain = 3,
    NotImp = 4,
    Refused = 5,
}

/// One parsed query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query<'a> {
    pub id: u16,
    /// The opcode and RD bit, echoed in the answer.
    flags: u16,
    /// The question name, lowercase, without the trailing dot; bytes other than letters, digits,
    /// `-` and `_` are escaped (`\.`, `\DDD`), so it is safe to log.
    pub name: String,
    /// Every label is plain (letters, digits, `-`, `_`): only such a name can match an entry.
    pub plain: bool,
    pub qtype: u16,
    pub qclass: u16,
    /// The question section as received (name, type, class), echoed in the answer.
    question: &'a [u8],
}

/// Why a packet is not a query airlock answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// Not even a header, or a response: drop it silently.
    Drop,
    /// A header airlock can answer with an error: FORMERR or NOTIMP, with this id and flags.
    Answer { id: u16, flags: u16, rcode: Rcode },
}

fn be16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*bytes.get(at)?, *bytes.get(at + 1)?]))
}

/// Parses a query.
pub fn parse_query(packet: &[u8]) -> Result<Query<'_>, Malformed> {
    let (Some(id), Some(flags), Some(qdcount)) =
        (be16(packet, 0), be16(packet, 2), be16(packet, 4))
    else {
        return Err(Malformed::Drop);
    };
    if flags & FLAG_QR != 0 {
        return Err(Malformed::Drop);
    }
    let echoed = flags & (OPCODE_MASK | FLAG_RD);
    let error = |rcode| Malformed::Answer {
        id,
        flags: echoed,
        rcode,
    };
    if flags & OPCODE_MASK != 0 {
        return Err(error(Rcode::NotImp));
    }
    if qdcount != 1 {
        return Err(error(Rcode::FormErr));
    }
    let (name, plain, name_end) = read_name(packet, HEADER_LEN).ok_or(error(Rcode::FormErr))?;
    let (Some(qtype), Some(qclass)) = (be16(packet, name_end), be16(packet, name_end + 2)) else {
        return Err(error(Rcode::FormErr));
    };
    Ok(Query {
        id,
        flags: echoed,
        name,
        plain,
        qtype,
        qclass,
        question: &packet[HEADER_LEN..name_end + 4],
    })
}

/// Reads an uncompressed name at `at`: (text, plain, offset after the name).
fn read_name(packet: &[u8], mut at: usize) -> Option<(String, bool, usize)> {
    let mut name = String::new();
    let mut plain = true;
    let mut wire_len = 0usize;
    loop {
        let len = usize::from(*packet.get(at)?);
        at += 1;
        wire_len += len + 1;
        if len == 0 {
            break;
        }
        // 0xC0: a compression pointer; 0x40/0x80: reserved label types. Queries need neither.
        if len > 63 || wire_len > MAX_NAME_LEN {
            return None;
        }
        let label = packet.get(at..at + len)?;
        at += len;
        if !name.is_empty() {
            name.push('.');
        }
        for &byte in label {
            let byte = byte.to_ascii_lowercase();
            if byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_' {
                name.push(char::from(byte));
            } else {
                plain = false;
                if byte == b'.' || byte == b'\\' {
                    name.push('\\');
                    name.push(char::from(byte));
                } else {
                    name.push_str(&format!("\\{byte:03}"));
                }
            }
        }
    }
    if name.is_empty() {
        plain = false;
    }
    Some((name, plain, at))
}

/// What the resolver answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// One A record.
    Address {
        ip: Ipv4Addr,
        ttl: u32,
    },
    /// The name exists but has no record of this type (AAAA, MX, ... of an allowed name).
    NoData,
    Error(Rcode),
}

/// Encodes the answer to `query`.
pub fn encode_answer(query: &Query<'_>, answer: Answer) -> Vec<u8> {
    let rcode = match answer {
        Answer::Error(rcode) => rcode,
        _ => Rcode::NoError,
    };
    let records: u16 = matches!(answer, Answer::Address { .. }).into();
    let mut out = Vec::with_capacity(HEADER_LEN + query.question.len() + 16);
    out.extend_from_slice(&query.id.to_be_bytes());
    let flags = FLAG_QR | FLAG_AA | FLAG_RA | query.flags | rcode as u16;
    out.extend_from_slice(&flags.to_be_bytes());
    for count in [1, records, 0, 0] {
        out.extend_from_slice(&count.to_be_bytes());
    }
    out.extend_from_slice(query.question);
    if let Answer::Address { ip, ttl } = answer {
        // The owner name is a pointer to the question name at offset 12.
        out.extend_from_slice(&[0xC0, 0x0C]);
        out.extend_from_slice(&TYPE_A.to_be_bytes());
        out.extend_from_slice(&CLASS_IN.to_be_bytes());
        out.extend_from_slice(&ttl.to_be_bytes());
        out.extend_from_slice(&4u16.to_be_bytes());
        out.extend_from_slice(&ip.octets());
    }
    out
}

/// Encodes an error answer to a packet that could not be parsed as a query (no question).
pub fn encode_error(id: u16, flags: u16, rcode: Rcode) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&(FLAG_QR | FLAG_RA | flags | rcode as u16).to_be_bytes());
    out.extend_from_slice(&[0; 8]);
    out
}

/// A parsed answer (for tests and the fuzz target: every answer airlock writes must parse).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedAnswer {
    pub id: u16,
    pub rcode: u8,
    pub name: Option<String>,
    pub addresses: Vec<Ipv4Addr>,
}

/// Parses an answer airlock wrote (questions uncompressed, answers pointing at the question).
pub fn parse_answer(packet: &[u8]) -> Option<ParsedAnswer> {
    let id = be16(packet, 0)?;
    let flags = be16(packet, 2)?;
    if flags & FLAG_QR == 0 {
        return None;
    }
    let (qdcount, ancount) = (be16(packet, 4)?, be16(packet, 6)?);
    let mut at = HEADER_LEN;
    let mut name = None;
    for _ in 0..qdcount {
        let (text, _, end) = read_name(packet, at)?;
        name = Some(text);
        at = end + 4;
    }
    let mut addresses = Vec::new();
    for _ in 0..ancount {
        if packet.get(at..at + 2)? != [0xC0, 0x0C] {
            return None;
        }
        let rtype = be16(packet, at + 2)?;
        let rdlen = usize::from(be16(packet, at + 10)?);
        let data = packet.get(at + 12..at + 12 + rdlen)?;
        if rtype == TYPE_A {
            let octets: [u8; 4] = data.try_into().ok()?;
            addresses.push(Ipv4Addr::from(octets));
        }
        at += 12 + rdlen;
    }
    (at == packet.len()).then_some(ParsedAnswer {
        id,
        rcode: (flags & 0x000F) as u8,
        name,
        addresses,
    })
}

/// Builds a query (for tests, the bench and the fuzz seeds).
pub fn encode_query(id: u16, name: &str, qtype: u16) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + name.len() + 6);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&FLAG_RD.to_be_bytes());
    out.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.').filter(|l| !l.is_empty()) {
        out.push(label.len().min(63) as u8);
        out.extend_from_slice(&label.as_bytes()[..label.len().min(63)]);
    }
    out.push(0);
    out.extend_from_slice(&qtype.to_be_bytes());
    out.extend_from_slice(&CLASS_IN.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_query_and_answers_with_one_record() {
        let packet = encode_query(0xBEEF, "API.GitHub.com", TYPE_A);
        let query = parse_query(&packet).unwrap();
        assert_eq!(query.name, "api.github.com");
        assert!(query.plain);
        assert_eq!((query.qtype, query.qclass), (TYPE_A, CLASS_IN));
        let ip = Ipv4Addr::new(198, 18, 0, 1);
        let answer = encode_answer(&query, Answer::Address { ip, ttl: 60 });
        let parsed = parse_answer(&answer).unwrap();
        assert_eq!(parsed.id, 0xBEEF);
        assert_eq!(parsed.rcode, 0);
        assert_eq!(parsed.addresses, vec![ip]);
        // The question is echoed as sent (its case kept: 0x20 randomisation checks it).
        assert_eq!(&answer[12..12 + packet.len() - 12], &packet[12..]);
    }

    #[test]
    fn answers_errors_and_nodata() {
        let packet = encode_query(7, "evil.example", TYPE_AAAA);
        let query = parse_query(&packet).unwrap();
        let nx = parse_answer(&encode_answer(&query, Answer::Error(Rcode::NxDomain))).unwrap();
        assert_eq!((nx.rcode, nx.addresses.len()), (3, 0));
        let nodata = parse_answer(&encode_answer(&query, Answer::NoData)).unwrap();
        assert_eq!((nodata.rcode, nodata.addresses.len()), (0, 0));
    }

    #[test]
    fn refuses_what_a_stub_resolver_never_sends() {
        assert_eq!(parse_query(&[1, 2, 3]), Err(Malformed::Drop));
        let mut response = encode_query(1, "a.example", TYPE_A);
        response[2] |= 0x80;
        assert_eq!(parse_query(&response), Err(Malformed::Drop));
        let mut two = encode_query(1, "a.example", TYPE_A);
        two[5] = 2;
        assert!(matches!(
            parse_query(&two),
            Err(Malformed::Answer {
                rcode: Rcode::FormErr,
                ..
            })
        ));
        let mut update = encode_query(1, "a.example", TYPE_A);
        update[2] |= 5 << 3;
        assert!(matches!(
            parse_query(&update),
            Err(Malformed::Answer {
                rcode: Rcode::NotImp,
                ..
            })
        ));
        let mut pointer = encode_query(1, "a.example", TYPE_A);
        pointer[12] = 0xC0;
        assert!(matches!(
            parse_query(&pointer),
            Err(Malformed::Answer {
                rcode: Rcode::FormErr,
                ..
            })
        ));
        let truncated = encode_query(1, "a.example", TYPE_A);
        assert!(parse_query(&truncated[..truncated.len() - 1]).is_err());
        let error = encode_error(9, 0, Rcode::FormErr);
        assert_eq!(parse_answer(&error).unwrap().rcode, 1);
    }

    #[test]
    fn odd_labels_are_escaped_and_never_plain() {
        let mut packet = encode_query(1, "abc.example", TYPE_A);
        packet[13] = b'.';
        packet[14] = 0;
        let query = parse_query(&packet).unwrap();
        assert_eq!(query.name, "\\.\\000c.example");
        assert!(!query.plain);
        let root = [0u8, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1];
        assert!(!parse_query(&root).unwrap().plain);
    }

    proptest::proptest! {
        #[test]
        fn any_packet_parses_or_fails_cleanly(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            check_packet(&bytes);
        }

        #[test]
        fn mutated_queries_parse_or_fail_cleanly(
            name in "[a-z0-9.-]{1,80}",
            flips in proptest::collection::vec((0usize..100, proptest::num::u8::ANY), 0..4),
        ) {
            let mut packet = encode_query(1, &name, TYPE_A);
            for (at, byte) in flips {
                let len = packet.len();
                packet[at % len] = byte;
            }
            check_packet(&packet);
        }
    }

    /// Every query that parses gets answers that parse back, with its id and address.
    fn check_packet(bytes: &[u8]) {
        match parse_query(bytes) {
            Ok(query) => {
                let ip = Ipv4Addr::new(198, 18, 0, 9);
                let answer = encode_answer(&query, Answer::Address { ip, ttl: 1 });
                let parsed = parse_answer(&answer).unwrap();
                assert_eq!(parsed.id, query.id);
                assert_eq!(parsed.addresses, vec![ip]);
                assert!(parse_answer(&encode_answer(&query, Answer::NoData)).is_some());
            }
            Err(Malformed::Answer { id, flags, rcode }) => {
                assert_eq!(
                    parse_answer(&encode_error(id, flags, rcode)).unwrap().id,
                    id
                );
            }
            Err(Malformed::Drop) => {}
        }
    }
}
