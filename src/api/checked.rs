//! Partition asks after a handler's checks: those that passed go to their home shards in one
//! routed call (see `shard::partitions`), those refused keep their error, and the results
//! come back in request order.

use std::future::Future;

use crate::protocol::ErrorCode;
use crate::shard::Tp;

/// Runs the asks that passed with `run` (once, all of them) and merges every result back in
/// the order of `checked`.
pub(super) async fn run<A, R, F, Fut>(checked: Vec<Result<(Tp, A), ErrorCode>>, run: F) -> Vec<Result<R, ErrorCode>>
where
    F: FnOnce(Vec<(Tp, A)>) -> Fut,
    Fut: Future<Output = Vec<Result<R, ErrorCode>>>,
{
    let mut out: Vec<Option<Result<R, ErrorCode>>> = Vec::with_capacity(checked.len());
    let mut asks = Vec::new();
    for c in checked {
        match c {
            Ok(ask) => {
                asks.push(ask);
                out.push(None);
            }
            Err(e) => out.push(Some(Err(e))),
        }
    }
    let mut results = if asks.is_empty() { Vec::new() } else { run(asks).await }.into_iter();
    out.into_iter().map(|r| r.unwrap_or_else(|| results.next().unwrap_or(Err(ErrorCode::UnknownServerError)))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_asks_keep_their_error_and_the_order_holds() {
        let tp = |partition| Tp { topic: uuid::Uuid::nil(), partition };
        let checked = vec![Ok((tp(0), 10)), Err(ErrorCode::TopicAuthorizationFailed), Ok((tp(2), 30))];
        let out = futures_lite::future::block_on(run(checked, |asks: Vec<(Tp, i32)>| async move {
            assert_eq!(asks.len(), 2, "only the asks that passed are run");
            asks.into_iter().map(|(tp, a)| Ok(a + tp.partition)).collect()
        }));
        assert_eq!(out, vec![Ok(10), Err(ErrorCode::TopicAuthorizationFailed), Ok(32)]);
    }
}
