//! TPC-C consistency conditions (spec §3.3.2) on a quiescent database,
//! e.g. after a run or after recovery:
//!
//! 1. per warehouse, W_YTD = sum of its districts' D_YTD;
//! 2. per district, D_NEXT_O_ID − 1 = max(O_ID) = max(NO_O_ID);
//! 3. per district, max(NO_O_ID) − min(NO_O_ID) + 1 = number of new-order
//!    rows;
//! 4. per district, sum of O_OL_CNT = number of order-line rows;
//! 5. per order, O_CARRIER_ID is null iff the order has a new-order row;
//! 6. per order, O_OL_CNT = number of its order-line rows;
//! 7. per order line, OL_DELIVERY_D is null iff its order's O_CARRIER_ID
//!    is;
//! 8. per warehouse, W_YTD = sum of H_AMOUNT of its history rows;
//! 9. per district, D_YTD = sum of H_AMOUNT of its history rows;
//! 10. per customer, C_BALANCE = sum of OL_AMOUNT of its delivered order
//!     lines − sum of H_AMOUNT of its history rows;
//! 12. per customer, C_BALANCE + C_YTD_PAYMENT = sum of OL_AMOUNT of its
//!     delivered order lines.
//!
//! Condition 11 (orders minus new-orders = 2,100 per district) holds only
//! until the first Delivery and is not checked. Conditions 2 (its NO_O_ID
//! part) and 3 hold vacuously for a district without new-order rows (all
//! orders delivered). 5–7 catch a New-Order or Delivery applied in part,
//! 8–10 and 12 a Payment or Delivery applied in part, which 1–4 can miss.
//!
//! Memory: a few bytes per order and per customer (5–7 and 10 join order
//! lines to orders and customers).

use super::schema::*;
use super::{CUSTOMER, DISTRICT, HISTORY, NEW_ORDER_TABLE, ORDER, ORDER_LINE, WAREHOUSE};
use crate::error::{BenchError, BenchResult};
use crate::load::for_each_row;
use serde::Serialize;
use std::collections::BTreeMap;
use waypoint::Database;

/// The conditions [`verify`] checks.
pub const CONDITIONS: [u32; 11] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12];

/// What [`verify`] counted.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct TpccCheck {
    /// The conditions checked (all of them hold).
    pub conditions: Vec<u32>,
    pub warehouses: u64,
    pub districts: u64,
    pub customers: u64,
    pub orders: u64,
    pub new_orders: u64,
    pub order_lines: u64,
    pub history: u64,
    /// Sum of W_YTD over all warehouses, in cents.
    pub ytd_cents: i64,
}

#[derive(Default)]
struct PerDistrict {
    ytd: i64,
    next_o_id: u32,
    max_o_id: u32,
    ol_cnt_sum: u64,
    no_count: u64,
    no_min: u32,
    no_max: u32,
    ol_rows: u64,
    h_sum: i64,
}

/// One order, found by binary search: the orders are scanned in key order.
struct PerOrder {
    key: (u16, u8, u32),
    c_id: u32,
    ol_cnt: u8,
    delivered: bool,
    new_order: bool,
    lines: u32,
}

#[derive(Default)]
struct PerCustomer {
    balance: i64,
    ytd_payment: i64,
    /// Sum of H_AMOUNT of its history rows.
    paid: i64,
    /// Sum of OL_AMOUNT of its delivered order lines.
    delivered: i64,
}

fn fail(condition: u32, what: String) -> BenchError {
    BenchError::Verify(format!("TPC-C consistency condition {condition}: {what}"))
}

fn malformed(table: &str, key: &[u8]) -> BenchError {
    BenchError::Verify(format!("{table}: malformed row at key {key:02x?}"))
}

/// The order number of an order, new-order or order-line key and its
/// district's tallies; a row of a district that does not exist is an error.
fn district_of<'a>(
    districts: &'a mut BTreeMap<(u16, u8), PerDistrict>,
    table: &str,
    k: &[u8],
) -> BenchResult<(u32, &'a mut PerDistrict)> {
    let (w, d, o) = parse_order_key(k).ok_or_else(|| malformed(table, k))?;
    let e = districts.get_mut(&(w, d)).ok_or_else(|| {
        BenchError::Verify(format!(
            "{table} has a row of warehouse {w} district {d}, which does not exist"
        ))
    })?;
    Ok((o, e))
}

/// The order of a new-order or order-line key; `condition` fails if there
/// is none.
fn order_of<'a>(
    orders: &'a mut [PerOrder],
    table: &str,
    k: &[u8],
    condition: u32,
) -> BenchResult<&'a mut PerOrder> {
    let key = parse_order_key(k).ok_or_else(|| malformed(table, k))?;
    match orders.binary_search_by_key(&key, |o| o.key) {
        Ok(i) => Ok(&mut orders[i]),
        Err(_) => Err(fail(
            condition,
            format!(
                "{table} has a row of order {} of warehouse {} district {}, which does not exist",
                key.2, key.0, key.1
            ),
        )),
    }
}

fn customer_of<'a>(
    customers: &'a mut BTreeMap<(u16, u8, u32), PerCustomer>,
    (w, d, c): (u16, u8, u32),
    condition: u32,
    whose: &str,
) -> BenchResult<&'a mut PerCustomer> {
    customers.get_mut(&(w, d, c)).ok_or_else(|| {
        fail(
            condition,
            format!(
                "{whose} names customer {c} of warehouse {w} district {d}, which does not exist"
            ),
        )
    })
}

/// Check the [`CONDITIONS`] over every warehouse, district, customer and
/// order in `db`.
pub fn verify(db: &Database) -> BenchResult<TpccCheck> {
    let mut session = db.session();
    let mut warehouses: BTreeMap<u16, (i64, i64)> = BTreeMap::new();
    let mut districts: BTreeMap<(u16, u8), PerDistrict> = BTreeMap::new();
    let mut customers: BTreeMap<(u16, u8, u32), PerCustomer> = BTreeMap::new();
    let mut orders: Vec<PerOrder> = Vec::new();

    for_each_row(&mut session, &db.table(WAREHOUSE)?, |k, v| {
        let w = match k {
            [a, b] => u16::from_be_bytes([*a, *b]),
            _ => return Err(malformed(WAREHOUSE, k)),
        };
        let row = Warehouse::decode(v).ok_or_else(|| malformed(WAREHOUSE, k))?;
        warehouses.insert(w, (row.ytd, 0));
        Ok(())
    })?;
    for_each_row(&mut session, &db.table(DISTRICT)?, |k, v| {
        let wd = parse_district_key(k).ok_or_else(|| malformed(DISTRICT, k))?;
        let row = District::decode(v).ok_or_else(|| malformed(DISTRICT, k))?;
        let e = districts.entry(wd).or_default();
        e.ytd = row.ytd;
        e.next_o_id = row.next_o_id;
        Ok(())
    })?;
    for_each_row(&mut session, &db.table(CUSTOMER)?, |k, v| {
        let key = parse_order_key(k)
            .filter(|_| k.len() == 7)
            .ok_or_else(|| malformed(CUSTOMER, k))?;
        let row = Customer::decode(v).ok_or_else(|| malformed(CUSTOMER, k))?;
        customers.insert(
            key,
            PerCustomer {
                balance: row.balance,
                ytd_payment: row.ytd_payment,
                ..PerCustomer::default()
            },
        );
        Ok(())
    })?;
    let mut history_rows = 0u64;
    for_each_row(&mut session, &db.table(HISTORY)?, |k, v| {
        let h = History::decode(v).ok_or_else(|| malformed(HISTORY, k))?;
        history_rows += 1;
        match warehouses.get_mut(&h.w_id) {
            Some((_, paid)) => *paid += h.amount,
            None => {
                return Err(fail(
                    8,
                    format!(
                        "a history row names warehouse {}, which does not exist",
                        h.w_id
                    ),
                ))
            }
        }
        match districts.get_mut(&(h.w_id, h.d_id)) {
            Some(e) => e.h_sum += h.amount,
            None => {
                return Err(fail(
                    9,
                    format!(
                        "a history row names district {} of warehouse {}, which does not exist",
                        h.d_id, h.w_id
                    ),
                ))
            }
        }
        customer_of(
            &mut customers,
            (h.c_w_id, h.c_d_id, h.c_id),
            10,
            "a history row",
        )?
        .paid += h.amount;
        Ok(())
    })?;
    for_each_row(&mut session, &db.table(ORDER)?, |k, v| {
        let row = Order::decode(v).ok_or_else(|| malformed(ORDER, k))?;
        let (o, e) = district_of(&mut districts, ORDER, k)?;
        e.max_o_id = e.max_o_id.max(o);
        e.ol_cnt_sum += row.ol_cnt as u64;
        let key = parse_order_key(k).ok_or_else(|| malformed(ORDER, k))?;
        orders.push(PerOrder {
            key,
            c_id: row.c_id,
            ol_cnt: row.ol_cnt,
            delivered: row.carrier_id != 0,
            new_order: false,
            lines: 0,
        });
        Ok(())
    })?;
    let mut new_orders = 0u64;
    for_each_row(&mut session, &db.table(NEW_ORDER_TABLE)?, |k, _| {
        let (o, e) = district_of(&mut districts, NEW_ORDER_TABLE, k)?;
        e.no_min = if e.no_count == 0 { o } else { e.no_min.min(o) };
        e.no_max = e.no_max.max(o);
        e.no_count += 1;
        new_orders += 1;
        order_of(&mut orders, NEW_ORDER_TABLE, k, 5)?.new_order = true;
        Ok(())
    })?;
    let mut order_lines = 0u64;
    for_each_row(&mut session, &db.table(ORDER_LINE)?, |k, v| {
        let line = OrderLine::decode(v).ok_or_else(|| malformed(ORDER_LINE, k))?;
        let (o, e) = district_of(&mut districts, ORDER_LINE, k)?;
        e.ol_rows += 1;
        order_lines += 1;
        let order = order_of(&mut orders, ORDER_LINE, k, 6)?;
        order.lines += 1;
        let (w, d, c) = (order.key.0, order.key.1, order.c_id);
        // Condition 7.
        if (line.delivery_d != 0) != order.delivered {
            return Err(fail(
                7,
                format!(
                    "order {o} of warehouse {w} district {d}: O_CARRIER_ID is {}, \
                     a line's OL_DELIVERY_D is {}",
                    if order.delivered { "set" } else { "null" },
                    if line.delivery_d != 0 { "set" } else { "null" },
                ),
            ));
        }
        if order.delivered {
            customer_of(&mut customers, (w, d, c), 10, &format!("order {o}"))?.delivered +=
                line.amount;
        }
        Ok(())
    })?;

    // Condition 1.
    for (&w, &(w_ytd, _)) in &warehouses {
        let sum: i64 = districts
            .range((w, 0)..=(w, u8::MAX))
            .map(|(_, e)| e.ytd)
            .sum();
        if sum != w_ytd {
            return Err(fail(
                1,
                format!("warehouse {w}: W_YTD {w_ytd} != sum of D_YTD {sum} (cents)"),
            ));
        }
    }
    for (&(w, d), e) in &districts {
        if !warehouses.contains_key(&w) {
            return Err(fail(
                1,
                format!("district {d} of warehouse {w}, which does not exist"),
            ));
        }
        let at = format!("warehouse {w} district {d}");
        // Condition 2.
        let last = e.next_o_id.wrapping_sub(1);
        if last != e.max_o_id || (e.no_count > 0 && last != e.no_max) {
            return Err(fail(
                2,
                format!(
                    "{at}: D_NEXT_O_ID - 1 = {last}, max(O_ID) = {}, max(NO_O_ID) = {}",
                    e.max_o_id,
                    if e.no_count > 0 {
                        e.no_max.to_string()
                    } else {
                        "none".into()
                    }
                ),
            ));
        }
        // Condition 3.
        if e.no_count > 0 && (e.no_max - e.no_min + 1) as u64 != e.no_count {
            return Err(fail(
                3,
                format!(
                    "{at}: max(NO_O_ID) {} - min(NO_O_ID) {} + 1 != {} new-order rows",
                    e.no_max, e.no_min, e.no_count
                ),
            ));
        }
        // Condition 4.
        if e.ol_cnt_sum != e.ol_rows {
            return Err(fail(
                4,
                format!(
                    "{at}: sum(O_OL_CNT) {} != {} order-line rows",
                    e.ol_cnt_sum, e.ol_rows
                ),
            ));
        }
    }
    for o in &orders {
        let (w, d, id) = o.key;
        let at = format!("order {id} of warehouse {w} district {d}");
        // Condition 5.
        if o.delivered == o.new_order {
            return Err(fail(
                5,
                format!(
                    "{at}: O_CARRIER_ID is {} and it has {} new-order row",
                    if o.delivered { "set" } else { "null" },
                    if o.new_order { "a" } else { "no" },
                ),
            ));
        }
        // Condition 6.
        if o.ol_cnt as u32 != o.lines {
            return Err(fail(
                6,
                format!("{at}: O_OL_CNT {} != {} order-line rows", o.ol_cnt, o.lines),
            ));
        }
        customer_of(&mut customers, (w, d, o.c_id), 10, &at)?;
    }
    // Conditions 8 and 9.
    for (&w, &(w_ytd, paid)) in &warehouses {
        if w_ytd != paid {
            return Err(fail(
                8,
                format!("warehouse {w}: W_YTD {w_ytd} != sum of H_AMOUNT {paid} (cents)"),
            ));
        }
    }
    for (&(w, d), e) in &districts {
        if e.ytd != e.h_sum {
            return Err(fail(
                9,
                format!(
                    "warehouse {w} district {d}: D_YTD {} != sum of H_AMOUNT {} (cents)",
                    e.ytd, e.h_sum
                ),
            ));
        }
    }
    // Conditions 10 and 12.
    for (&(w, d, c), e) in &customers {
        let at = format!("customer {c} of warehouse {w} district {d}");
        if e.balance != e.delivered - e.paid {
            return Err(fail(
                10,
                format!(
                    "{at}: C_BALANCE {} != delivered OL_AMOUNT {} - H_AMOUNT {} (cents)",
                    e.balance, e.delivered, e.paid
                ),
            ));
        }
        if e.balance + e.ytd_payment != e.delivered {
            return Err(fail(
                12,
                format!(
                    "{at}: C_BALANCE {} + C_YTD_PAYMENT {} != delivered OL_AMOUNT {} (cents)",
                    e.balance, e.ytd_payment, e.delivered
                ),
            ));
        }
    }
    Ok(TpccCheck {
        conditions: CONDITIONS.to_vec(),
        warehouses: warehouses.len() as u64,
        districts: districts.len() as u64,
        customers: customers.len() as u64,
        orders: orders.len() as u64,
        new_orders,
        order_lines,
        history: history_rows,
        ytd_cents: warehouses.values().map(|(ytd, _)| ytd).sum(),
    })
}
