//! `BATCH` against a live Quiver server. The wire encoding is unit-tested in
//! `src/batch.rs`; Redis has no BATCH, so this waits for Quiver's server.

use quiver_client::{Batch, BatchOutcome, Condition};

use crate::common::TestServer;

#[test]
fn batch_applies_all_or_nothing() {
    let server = TestServer::start();
    let mut conn = server.connect();
    conn.set("b:existing", "old").unwrap();
    conn.set("b:doomed", "x").unwrap();

    // Every condition holds: everything is applied.
    let outcome = Batch::new()
        .put_if("b:new", "1", Condition::Absent)
        .put_if("b:existing", "new", Condition::equals("old"))
        .delete_if("b:doomed", Condition::Exists)
        .check("b:existing", Condition::Exists)
        .put("b:plain", "p")
        .execute(&mut conn)
        .unwrap();
    assert_eq!(outcome, BatchOutcome::Applied);
    assert_eq!(conn.get("b:new").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(
        conn.get("b:existing").unwrap().as_deref(),
        Some(&b"new"[..])
    );
    assert_eq!(conn.get("b:doomed").unwrap(), None);
    assert_eq!(conn.get("b:plain").unwrap().as_deref(), Some(&b"p"[..]));

    // Op 2 fails (its value is no longer "old"): nothing at all is applied,
    // not even the ops before it.
    let outcome = Batch::new()
        .put("b:first", "should not appear")
        .delete("b:plain")
        .put_if("b:existing", "newer", Condition::equals("old"))
        .put_if("b:never", "x", Condition::Absent)
        .execute(&mut conn)
        .unwrap();
    assert_eq!(
        outcome,
        BatchOutcome::ConditionFailed {
            op: 2,
            condition: "EQUALS".into()
        }
    );
    assert_eq!(conn.get("b:first").unwrap(), None);
    assert_eq!(conn.get("b:plain").unwrap().as_deref(), Some(&b"p"[..]));
    assert_eq!(
        conn.get("b:existing").unwrap().as_deref(),
        Some(&b"new"[..])
    );
    assert_eq!(conn.get("b:never").unwrap(), None);

    // Each kind of condition reports its own name and index.
    let absent = Batch::new()
        .check("b:new", Condition::Absent)
        .execute(&mut conn)
        .unwrap();
    assert_eq!(
        absent,
        BatchOutcome::ConditionFailed {
            op: 0,
            condition: "ABSENT".into()
        }
    );
    let exists = Batch::new()
        .put("b:x", "1")
        .delete_if("b:gone", Condition::Exists)
        .execute(&mut conn)
        .unwrap();
    assert_eq!(
        exists,
        BatchOutcome::ConditionFailed {
            op: 1,
            condition: "EXISTS".into()
        }
    );
    assert_eq!(conn.get("b:x").unwrap(), None);

    // Binary keys and values, keywords as data.
    let outcome = Batch::new()
        .put(b"IF\r\n\0", b"PUT")
        .put_if(b"CHECK", b"", Condition::Absent)
        .execute(&mut conn)
        .unwrap();
    assert!(outcome.is_applied());
    assert_eq!(conn.get(b"IF\r\n\0").unwrap().as_deref(), Some(&b"PUT"[..]));
    assert_eq!(conn.get(b"CHECK").unwrap().as_deref(), Some(&b""[..]));
}
