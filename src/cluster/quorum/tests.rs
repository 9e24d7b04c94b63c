//! The metadata quorum's log over three in-process replicas: every replica applies the same
//! records in the same order, once, across a leader failover and a restart that replays the
//! log.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use super::*;
use crate::cluster::group::tests::{leader, until, with_cluster, Node};

type Applied = Rc<RefCell<Vec<(i64, Vec<u8>)>>>;

fn follow(n: &Node) -> (Rc<Quorum>, Applied) {
    let seen: Applied = Rc::default();
    let s = seen.clone();
    let q =
        Quorum::start(n.group().unwrap(), Box::new(move |offset, value| s.borrow_mut().push((offset, value.to_vec()))));
    (q, seen)
}

#[test]
fn every_replica_applies_the_same_records_once_in_order() {
    with_cluster(3, Duration::from_secs(10), async |nodes, peers| {
        let mut qs: Vec<(Rc<Quorum>, Applied)> = nodes.iter().map(follow).collect();
        until("a leader", || leader(nodes).is_some()).await;
        let l = leader(nodes).unwrap();
        let follower = (l + 1) % 3;
        assert_eq!(qs[follower].0.propose(b"nope").await, Err(ErrorCode::NotLeaderOrFollower));
        for i in 0..10 {
            let offset = qs[l].0.propose(format!("change-{i}").as_bytes()).await.unwrap();
            let mine = qs[l].1.borrow();
            assert_eq!(mine.last().map(|(o, _)| *o), Some(offset), "applied here before it is answered");
        }
        until("all applied", || qs.iter().all(|(_, s)| s.borrow().len() == 10)).await;

        // Failover: the new leader's changes follow the old ones everywhere.
        nodes[l].crash().await;
        until("a new leader", || leader(nodes).is_some_and(|n| n != l)).await;
        let n = leader(nodes).unwrap();
        for i in 10..15 {
            qs[n].0.propose(format!("change-{i}").as_bytes()).await.unwrap();
        }
        // The old leader restarts and replays its log, then follows.
        nodes[l].start(peers).await;
        qs[l] = follow(&nodes[l]);
        until("all applied", || qs.iter().all(|(_, s)| s.borrow().len() == 15)).await;
        let expected: Vec<Vec<u8>> = (0..15).map(|i| format!("change-{i}").into_bytes()).collect();
        for (q, seen) in &qs {
            let seen = seen.borrow();
            assert_eq!(seen.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>(), expected);
            assert!(seen.windows(2).all(|w| w[0].0 < w[1].0), "offsets increase");
            assert_eq!(q.applied(), q.group().log().offsets().high_watermark);
        }
    });
}
