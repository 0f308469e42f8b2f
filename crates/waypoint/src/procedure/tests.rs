use super::*;

#[test]
fn parameters_decode_exactly_or_not_at_all() {
    let bytes = encode_params("p", &(7u32, "seven".to_string())).unwrap();
    let back: (u32, String) = decode_params(&bytes).unwrap();
    assert_eq!(back, (7, "seven".to_string()));
    let mut longer = bytes.clone();
    longer.push(0);
    let left = decode_params::<(u32, String)>(&longer).unwrap_err();
    assert!(left.contains("left over"), "{left}");
    assert!(decode_params::<(u32, String)>(&bytes[..bytes.len() - 1]).is_err());
    assert!(decode_params::<u64>(&[0xff; 11]).is_err());
}

#[test]
fn a_call_is_routed_by_its_parameters() {
    let procedures = Procedures::new()
        .single("one", |p: &u64| *p, |_: &mut Transaction<'_>, p: &u64| Ok(*p))
        .unwrap()
        .multi("all", |_: &mut Transaction<'_>, _: &()| Ok(()))
        .unwrap();
    let one = procedures.get("one").unwrap();
    let call = one.decode(&encode_params("one", &9u64).unwrap()).unwrap();
    assert_eq!(call.partition(), Partition::Key(9));
    let all = procedures.get("all").unwrap();
    assert_eq!(all.decode(&[]).unwrap().partition(), Partition::All);
    assert!(matches!(
        procedures.get("none"),
        Err(Error::UnknownProcedure { .. })
    ));
    let order = SerialOrder::new(4);
    assert_eq!(order.partition_of(9), 1);
    // Every partition's lock, then one: each released on drop.
    drop(order.enter(Partition::All));
    drop(order.enter(Partition::Key(3)));
    drop(order.enter(Partition::All));
}
