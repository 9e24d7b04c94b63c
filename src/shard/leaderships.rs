//! Brokers tell each other what they lead, so that every broker's Metadata names the leader
//! of every partition, those it holds no replica of included (DESIGN §9). Shard 0 sends each
//! peer the views of the partitions this broker leads whenever they change, and once a
//! second anyway (a peer that restarted, or a message lost on a link); the receiver keeps
//! them as told views on every shard (`ShardCluster::take_told`), below its own views and
//! below a later epoch, so a deposed leader that has not noticed yet cannot take a new
//! leader's place.
//!
//! Cost: each message lists every partition this broker leads, once a second per peer; a
//! broker leading many thousands of partitions would want only the changes sent.

use std::rc::Rc;
use std::time::{Duration, Instant};

use super::cluster::{ShardCluster, View};
use super::{Shard, Tp};

/// How often the full list goes to every peer even if nothing changed.
const REFRESH: Duration = Duration::from_secs(1);

impl Shard {
    /// On shard 0 each tick: tells every peer what this broker leads, if it changed or the
    /// refresh is due.
    pub(super) fn tell_peers_leaderships(self: &Rc<Self>, cluster: &Rc<ShardCluster>) {
        let due = cluster.told_peers_at.get().is_none_or(|at| at.elapsed() >= REFRESH);
        if !cluster.views_changed.get() && !due {
            return;
        }
        cluster.views_changed.set(false);
        cluster.told_peers_at.set(Some(Instant::now()));
        let led = cluster.led_views();
        for &(peer, _) in cluster.settings.voters.iter().filter(|(id, _)| *id != cluster.node_id) {
            let (shard, led) = (self.clone(), led.clone());
            glommio::spawn_local(async move { shard.tell_leaderships(peer, led, REFRESH).await }).detach();
        }
    }

    /// A peer's list of what it leads (on shard 0): every shard takes it.
    pub(super) fn take_told(self: &Rc<Self>, views: Vec<(Tp, View)>) {
        if let Some(c) = self.cluster() {
            c.take_told(&views);
        }
        self.tell_other_shards(move |c| c.take_told(&views));
    }
}
