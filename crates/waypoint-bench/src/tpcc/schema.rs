//! Keys and rows of the nine TPC-C tables.
//!
//! Keys are the spec's primary keys, big-endian so that key order is
//! numeric order and a district's orders, new-orders and order lines are
//! contiguous and ascending: warehouse `[w u16]`, district `[w][d u8]`,
//! customer `[w][d][c u32]`, order and new-order `[w][d][o u32]`, order
//! line `[w][d][o][ol u8]`, item `[i u32]`, stock `[w][i u32]`. History has
//! no primary key in the spec: its key is `[source u64][seq u64]`, unique
//! per loader or run worker.
//!
//! Rows are fixed binary layouts with the spec's field sizes (text fields
//! are fixed-width, zero-padded; C_DATA is variable, up to 500 bytes):
//! money is `i64` cents, tax and discount `u32` in units of 1/10,000,
//! dates `u64` milliseconds since the Unix epoch (0 for null), a null
//! O_CARRIER_ID is 0. Integers in rows are little-endian.

use waypoint::Error;

pub const DISTRICTS: u8 = 10;

pub fn warehouse_key(w: u16) -> [u8; 2] {
    w.to_be_bytes()
}

pub fn district_key(w: u16, d: u8) -> [u8; 3] {
    let [a, b] = w.to_be_bytes();
    [a, b, d]
}

fn wd_u32(w: u16, d: u8, x: u32) -> [u8; 7] {
    let mut k = [0; 7];
    k[..3].copy_from_slice(&district_key(w, d));
    k[3..].copy_from_slice(&x.to_be_bytes());
    k
}

pub fn customer_key(w: u16, d: u8, c: u32) -> [u8; 7] {
    wd_u32(w, d, c)
}

/// The key of an order and of its new-order row.
pub fn order_key(w: u16, d: u8, o: u32) -> [u8; 7] {
    wd_u32(w, d, o)
}

pub fn order_line_key(w: u16, d: u8, o: u32, ol: u8) -> [u8; 8] {
    let mut k = [0; 8];
    k[..7].copy_from_slice(&order_key(w, d, o));
    k[7] = ol;
    k
}

pub fn item_key(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}

pub fn stock_key(w: u16, i: u32) -> [u8; 6] {
    let mut k = [0; 6];
    k[..2].copy_from_slice(&w.to_be_bytes());
    k[2..].copy_from_slice(&i.to_be_bytes());
    k
}

/// A history row's key: the warehouse of the payment (its home, H_W_ID,
/// so under `command` the row is in the partition the payment runs in),
/// 48 bits telling writers apart (0: the load's rows) and a sequence
/// number.
pub fn history_key(w: u16, source: u64, seq: u64) -> [u8; 16] {
    debug_assert!(source < 1 << 48, "48 bits of source");
    let mut k = [0; 16];
    k[..2].copy_from_slice(&w.to_be_bytes());
    k[2..8].copy_from_slice(&source.to_be_bytes()[2..]);
    k[8..].copy_from_slice(&seq.to_be_bytes());
    k
}

/// (w, d, o) of an order, new-order or order-line key.
pub fn parse_order_key(k: &[u8]) -> Option<(u16, u8, u32)> {
    let w = u16::from_be_bytes(k.get(..2)?.try_into().ok()?);
    let o = u32::from_be_bytes(k.get(3..7)?.try_into().ok()?);
    Some((w, *k.get(2)?, o))
}

/// (w, d) of a district key.
pub fn parse_district_key(k: &[u8]) -> Option<(u16, u8)> {
    if k.len() != 3 {
        return None;
    }
    Some((u16::from_be_bytes([k[0], k[1]]), k[2]))
}

/// The customer-by-last-name index key: `[w][d] C_LAST 0x01 C_FIRST`.
/// Names hold no byte below 0x20, so all customers of one last name are
/// the secondary keys starting with [`last_name_prefix`], ordered by
/// C_FIRST (then by the primary key).
pub fn customer_name_index_key(customer_key: &[u8], row: &[u8]) -> Option<Vec<u8>> {
    let first = trim(row.get(Customer::FIRST)?);
    let last = trim(row.get(Customer::LAST)?);
    let mut k = Vec::with_capacity(3 + last.len() + 1 + first.len());
    k.extend_from_slice(customer_key.get(..3)?);
    k.extend_from_slice(last);
    k.push(1);
    k.extend_from_slice(first);
    Some(k)
}

pub fn last_name_prefix(w: u16, d: u8, last: &[u8]) -> Vec<u8> {
    let mut k = district_key(w, d).to_vec();
    k.extend_from_slice(last);
    k.push(1);
    k
}

/// The order-by-customer index key: `[w][d][O_C_ID u32]`; a customer's
/// orders are ordered by O_ID (the primary key), so the last entry is the
/// newest order.
pub fn order_customer_index_key(order_key: &[u8], row: &[u8]) -> Option<Vec<u8>> {
    let mut k = order_key.get(..3)?.to_vec();
    k.extend_from_slice(&Order::decode(row)?.c_id.to_be_bytes());
    Some(k)
}

pub fn order_customer_prefix(w: u16, d: u8, c: u32) -> [u8; 7] {
    wd_u32(w, d, c)
}

/// A fixed-width text field: `s` truncated or zero-padded to `N` bytes.
pub fn text<const N: usize>(s: &[u8]) -> [u8; N] {
    let mut t = [0; N];
    let n = s.len().min(N);
    t[..n].copy_from_slice(&s[..n]);
    t
}

/// A text field without its zero padding.
pub fn trim(s: &[u8]) -> &[u8] {
    let end = s.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
    &s[..end]
}

/// The error for a row that does not decode: the engine returned bytes
/// this workload did not write.
pub fn bad_row(table: &str) -> Error {
    Error::Corruption {
        path: table.into(),
        offset: 0,
        detail: format!("a {table} row does not decode as TPC-C wrote it"),
    }
}

struct Writer(Vec<u8>);

impl Writer {
    fn new(capacity: usize) -> Self {
        Writer(Vec::with_capacity(capacity))
    }
    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }
    fn u8(&mut self, x: u8) -> &mut Self {
        self.bytes(&[x])
    }
    fn u16(&mut self, x: u16) -> &mut Self {
        self.bytes(&x.to_le_bytes())
    }
    fn u32(&mut self, x: u32) -> &mut Self {
        self.bytes(&x.to_le_bytes())
    }
    fn i32(&mut self, x: i32) -> &mut Self {
        self.bytes(&x.to_le_bytes())
    }
    fn u64(&mut self, x: u64) -> &mut Self {
        self.bytes(&x.to_le_bytes())
    }
    fn i64(&mut self, x: i64) -> &mut Self {
        self.bytes(&x.to_le_bytes())
    }
    fn done(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.0)
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn arr<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.arr::<1>()?[0])
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.arr()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.arr()?))
    }
    fn i32(&mut self) -> Option<i32> {
        Some(i32::from_le_bytes(self.arr()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.arr()?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.arr()?))
    }
    /// The rest must be empty: a row of another length is not ours.
    fn end<T>(&self, v: T) -> Option<T> {
        self.0.is_empty().then_some(v)
    }
}

/// Street 1, street 2, city, state, zip: 71 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    pub street_1: [u8; 20],
    pub street_2: [u8; 20],
    pub city: [u8; 20],
    pub state: [u8; 2],
    pub zip: [u8; 9],
}

impl Address {
    fn put(&self, w: &mut Writer) {
        w.bytes(&self.street_1)
            .bytes(&self.street_2)
            .bytes(&self.city)
            .bytes(&self.state)
            .bytes(&self.zip);
    }
    fn get(r: &mut Reader<'_>) -> Option<Self> {
        Some(Address {
            street_1: r.arr()?,
            street_2: r.arr()?,
            city: r.arr()?,
            state: r.arr()?,
            zip: r.arr()?,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warehouse {
    pub name: [u8; 10],
    pub address: Address,
    /// W_TAX in 1/10,000.
    pub tax: u32,
    /// W_YTD in cents.
    pub ytd: i64,
}

impl Warehouse {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new(93);
        w.bytes(&self.name);
        self.address.put(&mut w);
        w.u32(self.tax).i64(self.ytd).done()
    }
    pub fn decode(b: &[u8]) -> Option<Self> {
        let mut r = Reader(b);
        let v = Warehouse {
            name: r.arr()?,
            address: Address::get(&mut r)?,
            tax: r.u32()?,
            ytd: r.i64()?,
        };
        r.end(v)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct District {
    pub name: [u8; 10],
    pub address: Address,
    pub tax: u32,
    pub ytd: i64,
    pub next_o_id: u32,
}

impl District {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new(97);
        w.bytes(&self.name);
        self.address.put(&mut w);
        w.u32(self.tax).i64(self.ytd).u32(self.next_o_id).done()
    }
    pub fn decode(b: &[u8]) -> Option<Self> {
        let mut r = Reader(b);
        let v = District {
            name: r.arr()?,
            address: Address::get(&mut r)?,
            tax: r.u32()?,
            ytd: r.i64()?,
            next_o_id: r.u32()?,
        };
        r.end(v)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Customer {
    pub first: [u8; 16],
    pub middle: [u8; 2],
    pub last: [u8; 16],
    pub address: Address,
    pub phone: [u8; 16],
    pub since: u64,
    /// "GC" or "BC".
    pub credit: [u8; 2],
    pub credit_lim: i64,
    pub discount: u32,
    pub balance: i64,
    pub ytd_payment: i64,
    pub payment_cnt: u32,
    pub delivery_cnt: u32,
    /// C_DATA, up to 500 bytes.
    pub data: Vec<u8>,
}

impl Customer {
    pub const MAX_DATA: usize = 500;
    /// Byte ranges of C_FIRST and C_LAST in an encoded row (the name
    /// index reads them without decoding the row).
    pub const FIRST: std::ops::Range<usize> = 0..16;
    pub const LAST: std::ops::Range<usize> = 18..34;

    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new(171 + self.data.len());
        w.bytes(&self.first).bytes(&self.middle).bytes(&self.last);
        self.address.put(&mut w);
        let data = &self.data[..self.data.len().min(Self::MAX_DATA)];
        w.bytes(&self.phone)
            .u64(self.since)
            .bytes(&self.credit)
            .i64(self.credit_lim)
            .u32(self.discount)
            .i64(self.balance)
            .i64(self.ytd_payment)
            .u32(self.payment_cnt)
            .u32(self.delivery_cnt)
            .u16(data.len() as u16)
            .bytes(data)
            .done()
    }

    pub fn decode(b: &[u8]) -> Option<Self> {
        let mut r = Reader(b);
        let mut v = Customer {
            first: r.arr()?,
            middle: r.arr()?,
            last: r.arr()?,
            address: Address::get(&mut r)?,
            phone: r.arr()?,
            since: r.u64()?,
            credit: r.arr()?,
            credit_lim: r.i64()?,
            discount: r.u32()?,
            balance: r.i64()?,
            ytd_payment: r.i64()?,
            payment_cnt: r.u32()?,
            delivery_cnt: r.u32()?,
            data: Vec::new(),
        };
        let n = r.u16()? as usize;
        v.data = r.take(n)?.to_vec();
        r.end(v)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct History {
    pub c_id: u32,
    pub c_d_id: u8,
    pub c_w_id: u16,
    pub d_id: u8,
    pub w_id: u16,
    pub date: u64,
    pub amount: i64,
    pub data: [u8; 24],
}

impl History {
    pub fn encode(&self) -> Vec<u8> {
        Writer::new(46)
            .u32(self.c_id)
            .u8(self.c_d_id)
            .u16(self.c_w_id)
            .u8(self.d_id)
            .u16(self.w_id)
            .u64(self.date)
            .i64(self.amount)
            .bytes(&self.data)
            .done()
    }
    pub fn decode(b: &[u8]) -> Option<Self> {
        let mut r = Reader(b);
        let v = History {
            c_id: r.u32()?,
            c_d_id: r.u8()?,
            c_w_id: r.u16()?,
            d_id: r.u8()?,
            w_id: r.u16()?,
            date: r.u64()?,
            amount: r.i64()?,
            data: r.arr()?,
        };
        r.end(v)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    pub c_id: u32,
    pub entry_d: u64,
    /// 0: null (not delivered).
    pub carrier_id: u8,
    pub ol_cnt: u8,
    pub all_local: u8,
}

impl Order {
    pub fn encode(&self) -> Vec<u8> {
        Writer::new(15)
            .u32(self.c_id)
            .u64(self.entry_d)
            .u8(self.carrier_id)
            .u8(self.ol_cnt)
            .u8(self.all_local)
            .done()
    }
    pub fn decode(b: &[u8]) -> Option<Self> {
        let mut r = Reader(b);
        let v = Order {
            c_id: r.u32()?,
            entry_d: r.u64()?,
            carrier_id: r.u8()?,
            ol_cnt: r.u8()?,
            all_local: r.u8()?,
        };
        r.end(v)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderLine {
    pub i_id: u32,
    pub supply_w_id: u16,
    /// 0: null (not delivered).
    pub delivery_d: u64,
    pub quantity: u8,
    pub amount: i64,
    pub dist_info: [u8; 24],
}

impl OrderLine {
    pub fn encode(&self) -> Vec<u8> {
        Writer::new(47)
            .u32(self.i_id)
            .u16(self.supply_w_id)
            .u64(self.delivery_d)
            .u8(self.quantity)
            .i64(self.amount)
            .bytes(&self.dist_info)
            .done()
    }
    pub fn decode(b: &[u8]) -> Option<Self> {
        let mut r = Reader(b);
        let v = OrderLine {
            i_id: r.u32()?,
            supply_w_id: r.u16()?,
            delivery_d: r.u64()?,
            quantity: r.u8()?,
            amount: r.i64()?,
            dist_info: r.arr()?,
        };
        r.end(v)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub im_id: u32,
    pub name: [u8; 24],
    pub price: i64,
    pub data: [u8; 50],
}

impl Item {
    pub fn encode(&self) -> Vec<u8> {
        Writer::new(86)
            .u32(self.im_id)
            .bytes(&self.name)
            .i64(self.price)
            .bytes(&self.data)
            .done()
    }
    pub fn decode(b: &[u8]) -> Option<Self> {
        let mut r = Reader(b);
        let v = Item {
            im_id: r.u32()?,
            name: r.arr()?,
            price: r.i64()?,
            data: r.arr()?,
        };
        r.end(v)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stock {
    pub quantity: i32,
    /// S_DIST_01 .. S_DIST_10.
    pub dist: [[u8; 24]; DISTRICTS as usize],
    pub ytd: u32,
    pub order_cnt: u16,
    pub remote_cnt: u16,
    pub data: [u8; 50],
}

impl Stock {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new(302);
        w.i32(self.quantity);
        for d in &self.dist {
            w.bytes(d);
        }
        w.u32(self.ytd)
            .u16(self.order_cnt)
            .u16(self.remote_cnt)
            .bytes(&self.data)
            .done()
    }
    pub fn decode(b: &[u8]) -> Option<Self> {
        let mut r = Reader(b);
        let quantity = r.i32()?;
        let mut dist = [[0; 24]; DISTRICTS as usize];
        for d in &mut dist {
            *d = r.arr()?;
        }
        let v = Stock {
            quantity,
            dist,
            ytd: r.u32()?,
            order_cnt: r.u16()?,
            remote_cnt: r.u16()?,
            data: r.arr()?,
        };
        r.end(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address() -> Address {
        Address {
            street_1: text(b"street one"),
            street_2: text(b"street two"),
            city: text(b"city"),
            state: text(b"CA"),
            zip: text(b"123411111"),
        }
    }

    fn customer() -> Customer {
        Customer {
            first: text(b"Ann"),
            middle: *b"OE",
            last: text(b"BARBARBAR"),
            address: address(),
            phone: text(b"0123456789012345"),
            since: 7,
            credit: *b"BC",
            credit_lim: 5_000_000,
            discount: 1234,
            balance: -1000,
            ytd_payment: 1000,
            payment_cnt: 1,
            delivery_cnt: 0,
            data: vec![b'x'; 400],
        }
    }

    #[test]
    fn rows_round_trip_and_reject_other_lengths() {
        let w = Warehouse {
            name: text(b"wh"),
            address: address(),
            tax: 1000,
            ytd: 30_000_000,
        };
        assert_eq!(Warehouse::decode(&w.encode()), Some(w.clone()));
        assert_eq!(w.encode().len(), 93);
        let d = District {
            name: text(b"d"),
            address: address(),
            tax: 5,
            ytd: 3_000_000,
            next_o_id: 3001,
        };
        assert_eq!(District::decode(&d.encode()), Some(d));
        let c = customer();
        let enc = c.encode();
        assert_eq!(Customer::decode(&enc), Some(c.clone()));
        assert_eq!(&enc[Customer::FIRST], &c.first);
        assert_eq!(&enc[Customer::LAST], &c.last);
        assert!(Customer::decode(&enc[..enc.len() - 1]).is_none());
        let h = History {
            c_id: 1,
            c_d_id: 2,
            c_w_id: 3,
            d_id: 4,
            w_id: 5,
            date: 6,
            amount: 1000,
            data: text(b"hello"),
        };
        assert_eq!(History::decode(&h.encode()), Some(h));
        let o = Order {
            c_id: 9,
            entry_d: 1,
            carrier_id: 0,
            ol_cnt: 15,
            all_local: 1,
        };
        assert_eq!(Order::decode(&o.encode()), Some(o.clone()));
        let mut long = o.encode();
        long.push(0);
        assert!(Order::decode(&long).is_none());
        let ol = OrderLine {
            i_id: 100_000,
            supply_w_id: 2,
            delivery_d: 0,
            quantity: 5,
            amount: 999_999,
            dist_info: text(b"info"),
        };
        assert_eq!(OrderLine::decode(&ol.encode()), Some(ol));
        let i = Item {
            im_id: 1,
            name: text(b"item"),
            price: 100,
            data: text(b"ORIGINAL"),
        };
        assert_eq!(Item::decode(&i.encode()), Some(i));
        let s = Stock {
            quantity: 91,
            dist: [text(b"dist"); 10],
            ytd: 0,
            order_cnt: 0,
            remote_cnt: 0,
            data: text(b"data"),
        };
        assert_eq!(s.encode().len(), 302);
        assert_eq!(Stock::decode(&s.encode()), Some(s));
    }

    #[test]
    fn keys_sort_numerically() {
        assert!(order_key(1, 2, 255) < order_key(1, 2, 256));
        assert!(order_key(1, 10, 5) < order_key(2, 1, 1));
        assert!(order_line_key(1, 2, 3, 15) < order_line_key(1, 2, 4, 1));
        assert!(stock_key(1, 100_000) < stock_key(2, 1));
        assert_eq!(
            parse_order_key(&order_line_key(7, 3, 3001, 2)),
            Some((7, 3, 3001))
        );
        assert_eq!(parse_district_key(&district_key(300, 10)), Some((300, 10)));
    }

    #[test]
    fn name_index_keys_group_a_last_name_ordered_by_first_name() {
        let key = customer_key(1, 2, 3);
        let mut c = customer();
        let ann = customer_name_index_key(&key, &c.encode()).unwrap();
        c.first = text(b"Bob");
        let bob = customer_name_index_key(&key, &c.encode()).unwrap();
        let prefix = last_name_prefix(1, 2, b"BARBARBAR");
        assert!(ann.starts_with(&prefix) && bob.starts_with(&prefix));
        assert!(ann < bob);
        // A longer last name with the same beginning is another group.
        c.last = text(b"BARBARBARABLE");
        let other = customer_name_index_key(&key, &c.encode()).unwrap();
        assert!(!other.starts_with(&prefix));
    }
}
