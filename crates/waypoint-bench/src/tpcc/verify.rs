//! TPC-C consistency conditions 1–4 (spec §3.3.2) on a quiescent
//! database, e.g. after a run or after recovery:
//!
//! 1. per warehouse, W_YTD = sum of its districts' D_YTD;
//! 2. per district, D_NEXT_O_ID − 1 = max(O_ID) = max(NO_O_ID);
//! 3. per district, max(NO_O_ID) − min(NO_O_ID) + 1 = number of new-order
//!    rows;
//! 4. per district, sum of O_OL_CNT = number of order-line rows.
//!
//! Conditions 2 (its NO_O_ID part) and 3 hold vacuously for a district
//! without new-order rows (all orders delivered).

use super::schema::*;
use super::{DISTRICT, NEW_ORDER_TABLE, ORDER, ORDER_LINE, WAREHOUSE};
use crate::error::{BenchError, BenchResult};
use crate::load::for_each_row;
use serde::Serialize;
use std::collections::BTreeMap;
use waypoint::Database;

/// What [`verify`] counted.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct TpccCheck {
    /// The conditions checked (all of them hold).
    pub conditions: Vec<u32>,
    pub warehouses: u64,
    pub districts: u64,
    pub orders: u64,
    pub new_orders: u64,
    pub order_lines: u64,
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

/// Check conditions 1–4 over every warehouse and district in `db`.
pub fn verify(db: &Database) -> BenchResult<TpccCheck> {
    let mut session = db.session();
    let mut warehouses: BTreeMap<u16, i64> = BTreeMap::new();
    let mut districts: BTreeMap<(u16, u8), PerDistrict> = BTreeMap::new();

    for_each_row(&mut session, &db.table(WAREHOUSE)?, |k, v| {
        let w = match k {
            [a, b] => u16::from_be_bytes([*a, *b]),
            _ => return Err(malformed(WAREHOUSE, k)),
        };
        let row = Warehouse::decode(v).ok_or_else(|| malformed(WAREHOUSE, k))?;
        warehouses.insert(w, row.ytd);
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
    let mut counts = (0u64, 0u64, 0u64);
    for_each_row(&mut session, &db.table(ORDER)?, |k, v| {
        let row = Order::decode(v).ok_or_else(|| malformed(ORDER, k))?;
        let (o, e) = district_of(&mut districts, ORDER, k)?;
        e.max_o_id = e.max_o_id.max(o);
        e.ol_cnt_sum += row.ol_cnt as u64;
        counts.0 += 1;
        Ok(())
    })?;
    for_each_row(&mut session, &db.table(NEW_ORDER_TABLE)?, |k, _| {
        let (o, e) = district_of(&mut districts, NEW_ORDER_TABLE, k)?;
        e.no_min = if e.no_count == 0 { o } else { e.no_min.min(o) };
        e.no_max = e.no_max.max(o);
        e.no_count += 1;
        counts.1 += 1;
        Ok(())
    })?;
    for_each_row(&mut session, &db.table(ORDER_LINE)?, |k, _| {
        let (_, e) = district_of(&mut districts, ORDER_LINE, k)?;
        e.ol_rows += 1;
        counts.2 += 1;
        Ok(())
    })?;

    // Condition 1.
    for (&w, &w_ytd) in &warehouses {
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
    Ok(TpccCheck {
        conditions: vec![1, 2, 3, 4],
        warehouses: warehouses.len() as u64,
        districts: districts.len() as u64,
        orders: counts.0,
        new_orders: counts.1,
        order_lines: counts.2,
        ytd_cents: warehouses.values().sum(),
    })
}
