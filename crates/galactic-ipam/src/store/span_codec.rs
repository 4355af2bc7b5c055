//! The 17-byte key of an address in the `lease`, `pool` and `released` tables: a family tag
//! (4 or 6) then the value as 16 big-endian bytes, so SQLite's `memcmp` order is numeric order
//! within a family and the families never interleave.

use crate::pool::Span;
use galactic_core::ip::Family;

/// Encoded length.
pub const LEN: usize = 17;

/// Encodes one address value.
pub fn encode(family: Family, value: u128) -> [u8; LEN] {
    let mut out = [0u8; LEN];
    out[0] = match family {
        Family::V4 => 4,
        Family::V6 => 6,
    };
    out[1..].copy_from_slice(&value.to_be_bytes());
    out
}

/// Decodes one address value; `None` when the blob is not one of ours.
pub fn decode(blob: &[u8]) -> Option<(Family, u128)> {
    if blob.len() != LEN {
        return None;
    }
    let family = match blob[0] {
        4 => Family::V4,
        6 => Family::V6,
        _ => return None,
    };
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&blob[1..]);
    let value = u128::from_be_bytes(bytes);
    if family == Family::V4 && value > u128::from(u32::MAX) {
        return None;
    }
    Some((family, value))
}

/// Decodes a span stored as its first and last value; `None` unless both are ours and of one
/// family.
pub fn decode_span(start: &[u8], last: &[u8]) -> Option<Span> {
    let (family, first) = decode(start)?;
    let (last_family, last) = decode(last)?;
    (family == last_family).then_some(Span {
        family,
        first,
        last,
    })
}

/// A slot index as a 16-byte big-endian blob (pool cursor, release queue).
pub fn encode_index(index: u128) -> [u8; 16] {
    index.to_be_bytes()
}

/// Decodes a slot index.
pub fn decode_index(blob: &[u8]) -> Option<u128> {
    <[u8; 16]>::try_from(blob).ok().map(u128::from_be_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_numeric_within_a_family_and_families_never_interleave() {
        let a = encode(Family::V4, 0xffff_ffff);
        let b = encode(Family::V6, 0);
        let c = encode(Family::V6, 1 << 64);
        let d = encode(Family::V6, (1 << 64) + 1);
        assert!(a < b && b < c && c < d);
        assert_eq!(decode(&c), Some((Family::V6, 1 << 64)));
        assert_eq!(decode(&a[..16]), None);
        let mut bad = a;
        bad[5] = 1;
        assert_eq!(
            decode(&bad),
            None,
            "an IPv4 value above 32 bits is rejected"
        );
        assert_eq!(decode_index(&encode_index(42)), Some(42));
    }

    #[test]
    fn a_span_is_two_values_of_one_family() {
        let span = decode_span(&encode(Family::V6, 1), &encode(Family::V6, 9));
        assert_eq!(
            span,
            Some(Span {
                family: Family::V6,
                first: 1,
                last: 9
            })
        );
        assert_eq!(
            decode_span(&encode(Family::V4, 1), &encode(Family::V6, 9)),
            None,
            "ends of two families are not a span"
        );
        assert_eq!(decode_span(&encode(Family::V4, 1), &[0; 3]), None);
    }
}
