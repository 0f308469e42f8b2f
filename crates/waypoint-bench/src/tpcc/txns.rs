//! The five TPC-C transactions (spec §2.4–§2.8) and their inputs.
//!
//! [`Inputs`] draws a transaction type from the standard mix (45% New-Order,
//! 43% Payment, 4% each Order-Status, Delivery, Stock-Level) and the
//! transaction's input data as the spec's terminal would; the functions
//! below run one transaction's reads and writes on a [`Transaction`] (the
//! driver commits it). A New-Order with an unused item number returns
//! [`intended_rollback`]: the driver rolls it back and counts an abort of
//! `new_order`. A [`TpccWorker`] also keeps the [`Effect`] of its last
//! transaction, for a caller that checks after a crash that what it
//! committed is there (the crash simulator, `waypoint-sim`).

use super::procedures::{DeliveryArgs, Drawn, NewOrderArgs, PaymentArgs, StockLevelArgs};
use super::random::{last_name, nurand, NuConstants};
use super::schema::*;
use super::{Tables, TpccConfig, DELIVERY, NEW_ORDER, ORDER_STATUS, PAYMENT, STOCK_LEVEL};
use crate::workload::{intended_rollback, Ack, InFlightCall, Submitted, TypedCall, Worker};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::hint::black_box;
use waypoint::{Error, PendingCommit, Session, Table, Transaction};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineInput {
    pub i_id: u32,
    pub supply_w: u16,
    pub quantity: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewOrderInput {
    pub d: u8,
    pub c: u32,
    pub lines: Vec<LineInput>,
    /// The last line's item number is unused (§2.4.1.4): roll back.
    pub rollback: bool,
}

/// A customer chosen by number or by last name (then the middle one of
/// those with that name, ordered by C_FIRST).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CustomerSel {
    Id(u32),
    Last(Vec<u8>),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentInput {
    pub d: u8,
    pub c_w: u16,
    pub c_d: u8,
    pub customer: CustomerSel,
    /// H_AMOUNT in cents: 1.00 ..= 5,000.00.
    pub amount: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderStatusInput {
    pub d: u8,
    pub customer: CustomerSel,
}

/// Draws transaction types and inputs for a terminal of home warehouse
/// `home`.
pub struct Inputs {
    pub rng: SmallRng,
    pub home: u16,
    warehouses: u16,
    items: u32,
    customers: u32,
    last_names: u32,
    c: NuConstants,
    /// Remote order lines and payments as the spec draws them; false:
    /// always the home warehouse ([`super::Tpcc::without_remote`]).
    pub remote: bool,
    /// `Some(pct)`: instead of the spec's remote accesses, `pct`% of the
    /// New-Orders (one line from another warehouse) and of the Payments
    /// (a customer of another warehouse) are remote, the rest local:
    /// seed 001's multi-partition fraction ([`super::Tpcc::multi_partition`]).
    pub multi_partition: Option<u8>,
}

impl Inputs {
    pub fn new(config: &TpccConfig, c: NuConstants, home: u16, seed: u64) -> Self {
        Inputs {
            rng: SmallRng::seed_from_u64(seed),
            home,
            warehouses: config.warehouses as u16,
            items: config.items(),
            customers: config.customers_per_district(),
            last_names: config.last_names(),
            c,
            remote: true,
            multi_partition: None,
        }
    }

    /// Is this draw's transaction made remote (multi-partition), when
    /// [`Inputs::multi_partition`] sets the fraction? Draws only then.
    fn drawn_remote(&mut self) -> Option<bool> {
        let pct = self.multi_partition?;
        Some(self.warehouses > 1 && self.rng.gen_range(0..100u8) < pct)
    }

    /// 45/43/4/4/4.
    pub fn choose_type(&mut self) -> usize {
        match self.rng.gen_range(0..100) {
            0..=44 => NEW_ORDER,
            45..=87 => PAYMENT,
            88..=91 => ORDER_STATUS,
            92..=95 => DELIVERY,
            _ => STOCK_LEVEL,
        }
    }

    fn district(&mut self) -> u8 {
        self.rng.gen_range(1..=DISTRICTS)
    }

    /// A warehouse other than the home one (needs two or more).
    fn remote_warehouse(&mut self) -> u16 {
        let w = self.rng.gen_range(1..self.warehouses);
        if w >= self.home {
            w + 1
        } else {
            w
        }
    }

    fn customer_id(&mut self) -> u32 {
        nurand(&mut self.rng, 1023, self.c.c_id, 1, self.customers)
    }

    /// 60% by last name, 40% by number.
    fn customer(&mut self) -> CustomerSel {
        if self.rng.gen_range(0..100) < 60 {
            let n = nurand(&mut self.rng, 255, self.c.c_last, 0, self.last_names - 1);
            CustomerSel::Last(last_name(n))
        } else {
            CustomerSel::Id(self.customer_id())
        }
    }

    pub(crate) fn new_order(&mut self) -> NewOrderInput {
        let d = self.district();
        let c = self.customer_id();
        let n = self.rng.gen_range(5..=15);
        let rollback = self.rng.gen_range(0..100) == 0;
        let lines = (0..n)
            .map(|k| {
                let i_id = if rollback && k == n - 1 {
                    self.items + 1
                } else {
                    nurand(&mut self.rng, 8191, self.c.ol_i_id, 1, self.items)
                };
                // Drawn in both modes, so that they see the same items,
                // quantities and customers.
                let supply_w = if self.warehouses > 1 && self.rng.gen_range(0..100) == 0 {
                    let remote = self.remote_warehouse();
                    if self.remote {
                        remote
                    } else {
                        self.home
                    }
                } else {
                    self.home
                };
                LineInput {
                    i_id,
                    supply_w,
                    quantity: self.rng.gen_range(1..=10),
                }
            })
            .collect::<Vec<LineInput>>();
        let mut lines = lines;
        if let Some(remote) = self.drawn_remote() {
            for line in &mut lines {
                line.supply_w = self.home;
            }
            if remote {
                lines[0].supply_w = self.remote_warehouse();
            }
        }
        NewOrderInput {
            d,
            c,
            lines,
            rollback,
        }
    }

    pub(crate) fn payment(&mut self) -> PaymentInput {
        let d = self.district();
        let (c_w, c_d) = if self.warehouses > 1 && self.rng.gen_range(0..100) < 15 {
            let remote = (self.remote_warehouse(), self.district());
            if self.remote {
                remote
            } else {
                (self.home, d)
            }
        } else {
            (self.home, d)
        };
        let (c_w, c_d) = match self.drawn_remote() {
            Some(true) => (self.remote_warehouse(), self.district()),
            Some(false) => (self.home, d),
            None => (c_w, c_d),
        };
        PaymentInput {
            d,
            c_w,
            c_d,
            customer: self.customer(),
            amount: self.rng.gen_range(100..=500_000),
        }
    }

    pub(crate) fn order_status(&mut self) -> OrderStatusInput {
        OrderStatusInput {
            d: self.district(),
            customer: self.customer(),
        }
    }

    /// O_CARRIER_ID 1..=10.
    pub fn carrier(&mut self) -> u8 {
        self.rng.gen_range(1..=10)
    }

    /// The Stock-Level threshold 10..=20.
    pub fn threshold(&mut self) -> i32 {
        self.rng.gen_range(10..=20)
    }
}

/// What the last transaction of a [`TpccWorker`] wrote if it commits:
/// enough to find each of its rows after a crash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Nothing: Order-Status, Stock-Level, or a body that failed.
    None,
    /// Order `o_id` of district (w, d), for customer `c`, with `lines`
    /// order lines (numbers 1..=lines), and its new-order row.
    NewOrder {
        w: u16,
        d: u8,
        o_id: u32,
        c: u32,
        lines: u8,
    },
    /// A payment of `amount` cents to district (w, d), recorded in the
    /// history row `history_key`.
    Payment {
        w: u16,
        d: u8,
        amount: i64,
        history_key: [u8; 16],
    },
    /// The orders delivered with carrier `carrier`, per district of
    /// warehouse `w` (`orders[d - 1]`; 0: the district had none).
    Delivery {
        w: u16,
        carrier: u8,
        orders: [u32; DISTRICTS as usize],
    },
}

/// One terminal: a home warehouse, and for Stock-Level a fixed district.
pub struct TpccWorker<'a> {
    pub(crate) inputs: Inputs,
    t: &'a Tables,
    sl_district: u8,
    /// History keys of this worker: `[source][seq]`.
    history_source: u64,
    seq: u64,
    last: Effect,
    /// Run as stored procedures under every scheme.
    pub(crate) procedures: bool,
}

impl<'a> TpccWorker<'a> {
    pub(crate) fn new(
        config: &TpccConfig,
        t: &'a Tables,
        c: NuConstants,
        worker: usize,
        history_source: u64,
        seed: u64,
    ) -> Self {
        let w = config.warehouses as usize;
        TpccWorker {
            inputs: Inputs::new(config, c, (worker % w + 1) as u16, seed),
            t,
            sl_district: ((worker / w) % DISTRICTS as usize + 1) as u8,
            history_source,
            seq: 0,
            last: Effect::None,
            procedures: false,
        }
    }

    /// What the transaction of the last [`Worker::next`] wrote, if its body
    /// succeeded ([`Effect::None`] otherwise); it is durable once its
    /// commit is acknowledged.
    pub fn last_effect(&self) -> &Effect {
        &self.last
    }
}

impl TpccWorker<'_> {
    /// The next transaction: its type from the mix, its inputs, and what
    /// its body would otherwise take from the clock or the terminal.
    pub fn draw(&mut self) -> Drawn {
        let now = super::now_ms();
        match self.inputs.choose_type() {
            NEW_ORDER => Drawn::NewOrder(NewOrderArgs {
                input: self.inputs.new_order(),
                now,
            }),
            PAYMENT => {
                self.seq += 1;
                let history_key = history_key(self.inputs.home, self.history_source, self.seq);
                Drawn::Payment(PaymentArgs {
                    input: self.inputs.payment(),
                    now,
                    history_key,
                })
            }
            ORDER_STATUS => Drawn::OrderStatus(self.inputs.order_status()),
            DELIVERY => Drawn::Delivery(DeliveryArgs {
                carrier: self.inputs.carrier(),
                now,
            }),
            _ => Drawn::StockLevel(StockLevelArgs {
                d: self.sl_district,
                threshold: self.inputs.threshold(),
            }),
        }
    }

    /// The home warehouse.
    pub fn home(&self) -> u16 {
        self.inputs.home
    }
}

impl Worker for TpccWorker<'_> {
    fn next(&mut self, tx: &mut Transaction<'_>) -> (usize, Result<(), Error>) {
        let drawn = self.draw();
        self.last = Effect::None;
        let result = drawn.run(tx, self.t, self.inputs.home);
        (
            drawn.ty(),
            result.map(|effect| {
                self.last = effect;
            }),
        )
    }

    /// As stored procedures under `command` (the only writes it takes),
    /// and under the other schemes when asked ([`super::Tpcc::with_procedures`]).
    fn call(
        &mut self,
        session: &mut Session,
        wait_now: bool,
        ack: Option<Ack>,
    ) -> Option<(usize, Result<PendingCommit, Error>)> {
        if !(self.procedures || session.writes_only_in_procedures()) {
            return None;
        }
        let drawn = self.draw();
        let ty = drawn.ty();
        self.last = Effect::None;
        let called = drawn.call(session, self.inputs.home, ack, wait_now);
        Some((
            ty,
            called.map(|(effect, pending)| {
                self.last = effect;
                pending
            }),
        ))
    }

    fn submit(&mut self, session: &mut Session) -> Submitted {
        let drawn = self.draw();
        let ty = drawn.ty();
        // What it writes is known only once it runs.
        self.last = Effect::None;
        Some((
            ty,
            drawn.submit(session, self.inputs.home).map(|call| {
                Box::new(TypedCall {
                    ty,
                    call,
                    ty_of: |_, ty| ty,
                }) as Box<dyn InFlightCall>
            }),
        ))
    }
}

/// Read and decode a row that must exist.
fn get<T>(
    tx: &mut Transaction<'_>,
    table: &Table,
    key: &[u8],
    decode: fn(&[u8]) -> Option<T>,
) -> Result<T, Error> {
    let v = tx.get(table, key)?.ok_or(Error::KeyNotFound)?;
    decode(&v).ok_or_else(|| bad_row(table.name()))
}

/// The customer key for `sel` in district (w, d).
fn find_customer(
    tx: &mut Transaction<'_>,
    t: &Tables,
    w: u16,
    d: u8,
    sel: &CustomerSel,
) -> Result<[u8; 7], Error> {
    match sel {
        CustomerSel::Id(c) => Ok(customer_key(w, d, *c)),
        CustomerSel::Last(last) => {
            let from = last_name_prefix(w, d, last);
            let to = waypoint::prefix_successor(&from).expect("the prefix ends with 0x01");
            let all = tx.index_scan(
                &t.customer_by_name,
                from.as_slice()..to.as_slice(),
                1000,
                false,
            )?;
            // Ordered by C_FIRST: the one at position ceil(n / 2).
            let n = all.len();
            let mid = all.get(n.saturating_sub(1) / 2).ok_or(Error::KeyNotFound)?;
            mid.primary
                .as_slice()
                .try_into()
                .map_err(|_| bad_row(t.customer_by_name.name()))
        }
    }
}

fn customer_id(key: &[u8; 7]) -> u32 {
    u32::from_be_bytes([key[3], key[4], key[5], key[6]])
}

/// §2.4.2: enter an order of 5–15 lines. Returns its O_ID.
pub(crate) fn new_order(
    tx: &mut Transaction<'_>,
    t: &Tables,
    w: u16,
    inp: &NewOrderInput,
    now: u64,
) -> Result<u32, Error> {
    let wh = get(tx, &t.warehouse, &warehouse_key(w), Warehouse::decode)?;
    let dk = district_key(w, inp.d);
    let mut district = get(tx, &t.district, &dk, District::decode)?;
    let o_id = district.next_o_id;
    district.next_o_id += 1;
    tx.update(&t.district, &dk, &district.encode())?;
    let customer = get(
        tx,
        &t.customer,
        &customer_key(w, inp.d, inp.c),
        Customer::decode,
    )?;
    let ok = order_key(w, inp.d, o_id);
    let order = Order {
        c_id: inp.c,
        entry_d: now,
        carrier_id: 0,
        ol_cnt: inp.lines.len() as u8,
        all_local: inp.lines.iter().all(|l| l.supply_w == w) as u8,
    };
    tx.insert(&t.order, &ok, &order.encode())?;
    tx.insert(&t.new_order, &ok, &[])?;
    let mut total = 0i64;
    for (n, line) in inp.lines.iter().enumerate() {
        let Some(item) = tx.get(&t.item, &item_key(line.i_id))? else {
            // The unused item number: the whole order rolls back.
            return Err(intended_rollback());
        };
        let item = Item::decode(&item).ok_or_else(|| bad_row(t.item.name()))?;
        let sk = stock_key(line.supply_w, line.i_id);
        let mut stock = get(tx, &t.stock, &sk, Stock::decode)?;
        let q = line.quantity as i32;
        stock.quantity = if stock.quantity >= q + 10 {
            stock.quantity - q
        } else {
            stock.quantity - q + 91
        };
        stock.ytd = stock.ytd.wrapping_add(q as u32);
        stock.order_cnt = stock.order_cnt.wrapping_add(1);
        if line.supply_w != w {
            stock.remote_cnt = stock.remote_cnt.wrapping_add(1);
        }
        tx.update(&t.stock, &sk, &stock.encode())?;
        let amount = q as i64 * item.price;
        total += amount;
        let original = |d: &[u8]| d.windows(8).any(|x| x == b"ORIGINAL");
        black_box(original(&item.data) && original(&stock.data)); // brand-generic
        let row = OrderLine {
            i_id: line.i_id,
            supply_w_id: line.supply_w,
            delivery_d: 0,
            quantity: line.quantity,
            amount,
            dist_info: stock.dist[(inp.d - 1) as usize],
        };
        let lk = order_line_key(w, inp.d, o_id, n as u8 + 1);
        tx.insert(&t.order_line, &lk, &row.encode())?;
    }
    // The total the terminal would display.
    let taxes = 10_000 + wh.tax as i64 + district.tax as i64;
    black_box(total * (10_000 - customer.discount as i64) / 10_000 * taxes / 10_000);
    Ok(o_id)
}

/// §2.5.2: a customer's payment, to a district of the home warehouse.
pub(crate) fn payment(
    tx: &mut Transaction<'_>,
    t: &Tables,
    w: u16,
    inp: &PaymentInput,
    now: u64,
    history_key: &[u8],
) -> Result<(), Error> {
    let wk = warehouse_key(w);
    let mut wh = get(tx, &t.warehouse, &wk, Warehouse::decode)?;
    wh.ytd += inp.amount;
    tx.update(&t.warehouse, &wk, &wh.encode())?;
    let dk = district_key(w, inp.d);
    let mut district = get(tx, &t.district, &dk, District::decode)?;
    district.ytd += inp.amount;
    tx.update(&t.district, &dk, &district.encode())?;
    let ck = find_customer(tx, t, inp.c_w, inp.c_d, &inp.customer)?;
    let c_id = customer_id(&ck);
    let mut c = get(tx, &t.customer, &ck, Customer::decode)?;
    c.balance -= inp.amount;
    c.ytd_payment += inp.amount;
    c.payment_cnt += 1;
    if &c.credit == b"BC" {
        let mut data = format!(
            "{c_id} {} {} {} {w} {}.{:02} | ",
            inp.c_d,
            inp.c_w,
            inp.d,
            inp.amount / 100,
            inp.amount % 100
        )
        .into_bytes();
        data.extend_from_slice(&c.data);
        data.truncate(Customer::MAX_DATA);
        c.data = data;
    }
    tx.update(&t.customer, &ck, &c.encode())?;
    let mut h_data = trim(&wh.name).to_vec();
    h_data.extend_from_slice(b"    ");
    h_data.extend_from_slice(trim(&district.name));
    let h = History {
        c_id,
        c_d_id: inp.c_d,
        c_w_id: inp.c_w,
        d_id: inp.d,
        w_id: w,
        date: now,
        amount: inp.amount,
        data: text(&h_data),
    };
    tx.insert(&t.history, history_key, &h.encode())
}

/// §2.6.2: a customer's balance and newest order with its lines
/// (read-only).
pub(crate) fn order_status(
    tx: &mut Transaction<'_>,
    t: &Tables,
    w: u16,
    inp: &OrderStatusInput,
) -> Result<(), Error> {
    let ck = find_customer(tx, t, w, inp.d, &inp.customer)?;
    let c = get(tx, &t.customer, &ck, Customer::decode)?;
    black_box((c.balance, &c.first, &c.middle, &c.last));
    let prefix = order_customer_prefix(w, inp.d, customer_id(&ck));
    let newest = tx.index_scan(
        &t.order_by_customer,
        prefix.as_slice()..=prefix.as_slice(),
        1,
        true,
    )?;
    // Every loaded customer has an order; one without is reported empty.
    let Some(entry) = newest.first() else {
        return Ok(());
    };
    let order = get(tx, &t.order, &entry.primary, Order::decode)?;
    black_box((order.entry_d, order.carrier_id));
    for (_, v) in tx.scan_prefix(&t.order_line, &entry.primary, 16)? {
        let line = OrderLine::decode(&v).ok_or_else(|| bad_row(t.order_line.name()))?;
        black_box((line.i_id, line.supply_w_id, line.quantity, line.amount));
    }
    Ok(())
}

/// §2.7.4: deliver the oldest undelivered order of each of the 10
/// districts, all in one transaction. A district without one is skipped.
/// Returns the O_ID delivered per district (0: skipped).
pub(crate) fn delivery(
    tx: &mut Transaction<'_>,
    t: &Tables,
    w: u16,
    carrier: u8,
    now: u64,
) -> Result<[u32; DISTRICTS as usize], Error> {
    let mut delivered = [0; DISTRICTS as usize];
    for d in 1..=DISTRICTS {
        let oldest = tx.scan_prefix(&t.new_order, &district_key(w, d), 1)?;
        let Some((ok, _)) = oldest.first() else {
            continue;
        };
        if !tx.delete(&t.new_order, ok)? {
            return Err(Error::KeyNotFound);
        }
        let mut order = get(tx, &t.order, ok, Order::decode)?;
        order.carrier_id = carrier;
        tx.update(&t.order, ok, &order.encode())?;
        let mut sum = 0;
        for (lk, v) in tx.scan_prefix(&t.order_line, ok, 16)? {
            let mut line = OrderLine::decode(&v).ok_or_else(|| bad_row(t.order_line.name()))?;
            sum += line.amount;
            line.delivery_d = now;
            tx.update(&t.order_line, &lk, &line.encode())?;
        }
        let ck = customer_key(w, d, order.c_id);
        let mut c = get(tx, &t.customer, &ck, Customer::decode)?;
        c.balance += sum;
        c.delivery_cnt += 1;
        tx.update(&t.customer, &ck, &c.encode())?;
        let (_, _, o_id) = parse_order_key(ok).ok_or_else(|| bad_row(t.new_order.name()))?;
        delivered[(d - 1) as usize] = o_id;
    }
    Ok(delivered)
}

/// §2.8.2: how many items of the district's last 20 orders have stock
/// below `threshold` (read-only).
pub(crate) fn stock_level(
    tx: &mut Transaction<'_>,
    t: &Tables,
    w: u16,
    d: u8,
    threshold: i32,
) -> Result<(), Error> {
    let district = get(tx, &t.district, &district_key(w, d), District::decode)?;
    let next = district.next_o_id;
    let from = order_line_key(w, d, next.saturating_sub(20), 0);
    let to = order_line_key(w, d, next, 0);
    let lines = tx.scan(&t.order_line, from.as_slice()..to.as_slice(), 20 * 15)?;
    let mut items = Vec::with_capacity(lines.len());
    for (_, v) in &lines {
        let line = OrderLine::decode(v).ok_or_else(|| bad_row(t.order_line.name()))?;
        items.push(line.i_id);
    }
    items.sort_unstable();
    items.dedup();
    let mut low = 0;
    for i in items {
        let stock = get(tx, &t.stock, &stock_key(w, i), Stock::decode)?;
        low += (stock.quantity < threshold) as u32;
    }
    black_box(low);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(warehouses: u32, seed: u64) -> Inputs {
        let c = NuConstants {
            c_last: 100,
            c_id: 500,
            ol_i_id: 4000,
        };
        Inputs::new(&TpccConfig::new(warehouses), c, 1, seed)
    }

    #[test]
    fn the_mix_is_45_43_4_4_4() {
        let mut g = inputs(2, 11);
        let n = 200_000;
        let mut counts = [0u32; 5];
        for _ in 0..n {
            counts[g.choose_type()] += 1;
        }
        for (ty, want) in [45.0, 43.0, 4.0, 4.0, 4.0].into_iter().enumerate() {
            let got = 100.0 * counts[ty] as f64 / n as f64;
            assert!(
                (got - want).abs() < 0.5,
                "type {ty}: {got:.2}% (want {want}%)"
            );
        }
    }

    #[test]
    fn new_order_inputs_have_1_percent_rollbacks_and_remote_lines() {
        let mut g = inputs(4, 5);
        let (n, mut rollbacks, mut lines, mut remote) = (50_000, 0, 0, 0);
        for _ in 0..n {
            let o = g.new_order();
            assert!((5..=15).contains(&o.lines.len()));
            assert!((1..=10).contains(&o.d) && (1..=3000).contains(&o.c));
            rollbacks += o.rollback as u32;
            for (k, l) in o.lines.iter().enumerate() {
                lines += 1;
                remote += (l.supply_w != 1) as u32;
                assert!((1..=4).contains(&l.supply_w) && (1..=10).contains(&l.quantity));
                let unused = o.rollback && k == o.lines.len() - 1;
                assert_eq!(l.i_id == 100_001, unused);
                assert!(unused || (1..=100_000).contains(&l.i_id));
            }
        }
        let pct = |x: u32, of: u32| 100.0 * x as f64 / of as f64;
        assert!(
            (0.8..1.2).contains(&pct(rollbacks, n)),
            "{rollbacks} rollbacks"
        );
        assert!(
            (0.8..1.2).contains(&pct(remote, lines)),
            "{remote} of {lines} remote"
        );
        // One warehouse: never remote.
        let mut g = inputs(1, 5);
        assert!((0..5000).all(|_| g.new_order().lines.iter().all(|l| l.supply_w == 1)));
    }

    #[test]
    fn payments_are_15_percent_remote_and_60_percent_by_name() {
        let mut g = inputs(3, 9);
        let (n, mut remote, mut by_name) = (50_000, 0, 0);
        for _ in 0..n {
            let p = g.payment();
            assert!((100..=500_000).contains(&p.amount));
            if p.c_w != 1 {
                remote += 1;
            } else {
                assert_eq!(p.c_d, p.d);
            }
            if let CustomerSel::Last(name) = &p.customer {
                by_name += 1;
                assert!(name.len() >= 9 && name.len() <= 15);
            }
        }
        let pct = |x: u32| 100.0 * x as f64 / n as f64;
        assert!((14.0..16.0).contains(&pct(remote)), "{remote} remote");
        assert!((59.0..61.0).contains(&pct(by_name)), "{by_name} by name");
        let mut g = inputs(1, 9);
        assert!((0..5000).all(|_| g.payment().c_w == 1));
    }

    /// LeanStore's affinity mode: the home warehouse everywhere, and
    /// otherwise the same draws (items, quantities, customers) as the
    /// spec's mode of the same seed.
    #[test]
    fn without_remote_accesses_every_line_and_payment_stays_home() {
        let (mut spec, mut home) = (inputs(4, 11), inputs(4, 11));
        home.remote = false;
        for _ in 0..20_000 {
            let (a, b) = (spec.new_order(), home.new_order());
            assert!(b.lines.iter().all(|l| l.supply_w == 1));
            assert_eq!(
                a.lines
                    .iter()
                    .map(|l| (l.i_id, l.quantity))
                    .collect::<Vec<_>>(),
                b.lines
                    .iter()
                    .map(|l| (l.i_id, l.quantity))
                    .collect::<Vec<_>>()
            );
            let (a, b) = (spec.payment(), home.payment());
            assert_eq!((b.c_w, b.c_d), (1, b.d));
            assert_eq!((a.d, a.amount), (b.d, b.amount));
        }
    }

    #[test]
    fn by_last_name_picks_the_middle_customer_ordered_by_first_name() {
        use crate::workload::Workload;
        let dir = tempfile::tempdir().unwrap();
        let db = waypoint::Database::open(dir.path(), waypoint::Options::default()).unwrap();
        let config = TpccConfig {
            warehouses: 1,
            scale_down: 100,
        };
        let mut w = super::super::Tpcc::new(config, 1);
        w.setup(&db, 1).unwrap();
        let t = w.tables.as_ref().unwrap();
        let mut s = db.session();
        // Customer 1 of district 4 is the only "BARBARBAR" there; add
        // namesakes with chosen first names.
        let name = last_name(0);
        let mut tx = s.begin().unwrap();
        let one = get(
            &mut tx,
            &t.customer,
            &customer_key(1, 4, 1),
            Customer::decode,
        )
        .unwrap();
        drop(tx);
        let firsts: [&[u8]; 5] = [b"Eve", b"Bob", b"Dan", b"Cat", b"Fay"];
        let pick = |s: &mut waypoint::Session| {
            let mut tx = s.begin().unwrap();
            let sel = CustomerSel::Last(name.clone());
            let k = find_customer(&mut tx, t, 1, 4, &sel).unwrap();
            let c = get(&mut tx, &t.customer, &k, Customer::decode).unwrap();
            assert_eq!(trim(&c.last), name.as_slice());
            trim(&c.first).to_vec()
        };
        let mut names = vec![trim(&one.first).to_vec()];
        assert_eq!(pick(&mut s), names[0]);
        for (i, first) in firsts.iter().enumerate() {
            let mut c = one.clone();
            c.first = text(first);
            let key = customer_key(1, 4, 1000 + i as u32);
            s.run(3, |tx| tx.insert(&t.customer, &key, &c.encode()))
                .unwrap();
            names.push(first.to_vec());
            let mut sorted = names.clone();
            sorted.sort();
            // Position ceil(n / 2), 1-based.
            let want = &sorted[sorted.len().div_ceil(2) - 1];
            assert_eq!(&pick(&mut s), want, "among {sorted:?}");
        }
        drop(s);
        db.close().unwrap();
    }
}
