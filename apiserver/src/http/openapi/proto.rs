//! A protobuf writer for the few wire types the OpenAPI v2 document needs.

/// One message being written.
#[derive(Default)]
pub(crate) struct Message(Vec<u8>);

const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const LENGTH_DELIMITED: u64 = 2;

impl Message {
    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.0.push((value as u8 & 0x7f) | 0x80);
            value >>= 7;
        }
        self.0.push(value as u8);
    }

    fn tag(&mut self, field: u64, wire: u64) {
        self.varint(field << 3 | wire);
    }

    /// A string field (written even when empty).
    pub fn string(&mut self, field: u64, value: &str) -> &mut Self {
        self.bytes(field, value.as_bytes())
    }

    /// A bytes field.
    pub fn bytes(&mut self, field: u64, value: &[u8]) -> &mut Self {
        self.tag(field, LENGTH_DELIMITED);
        self.varint(value.len() as u64);
        self.0.extend_from_slice(value);
        self
    }

    /// An embedded message.
    pub fn message(&mut self, field: u64, value: &Message) -> &mut Self {
        self.bytes(field, &value.0)
    }

    /// A `bool` field.
    pub fn bool(&mut self, field: u64, value: bool) -> &mut Self {
        self.tag(field, VARINT);
        self.varint(u64::from(value));
        self
    }

    /// An `int64` field (two's complement, as protobuf writes negative values).
    pub fn int64(&mut self, field: u64, value: i64) -> &mut Self {
        self.tag(field, VARINT);
        self.varint(value as u64);
        self
    }

    /// A `double` field.
    pub fn double(&mut self, field: u64, value: f64) -> &mut Self {
        self.tag(field, FIXED64);
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }

    /// The encoded message.
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_written_as_protobuf_encodes_them() {
        let mut inner = Message::default();
        inner.int64(1, 150);
        let mut outer = Message::default();
        outer.string(2, "hi").message(3, &inner).bool(4, true);
        // Examples of the protobuf encoding guide: 150 is 0x96 0x01.
        assert_eq!(
            outer.into_bytes(),
            vec![0x12, 2, b'h', b'i', 0x1a, 3, 0x08, 0x96, 0x01, 0x20, 1]
        );
        let mut negative = Message::default();
        negative.int64(1, -1);
        assert_eq!(negative.into_bytes().len(), 11);
    }
}
