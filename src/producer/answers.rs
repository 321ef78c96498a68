//! The tasks awaiting the broker's answers to one sink's Produce requests, each known by
//! its request's token: a task that ends without an answer (it panicked, or was
//! cancelled) still yields its token, with [`IoError::AnswerLost`], so the sink settles
//! that request's batches instead of keeping them in flight for the rest of its life
//! (where they would hold flushes, the epoch bump and the sink's probes).

use std::collections::HashMap;
use std::future::Future;

use tokio::task::{Id, JoinError, JoinSet};

use crate::engine::connection::RawResponse;
use crate::engine::error::IoError;
use crate::protocol::ApiKey;

/// A token no request has (the sink numbers its requests from zero).
const NO_REQUEST: u64 = u64::MAX;

/// A request's token and what became of it.
pub(super) type Answer = (u64, Result<RawResponse, IoError>);

/// The answer tasks of one sink, on the worker's local task set.
pub(super) struct Answers {
    tasks: JoinSet<Answer>,
    tokens: HashMap<Id, u64>,
    addr: String,
}

impl Answers {
    /// No task yet; `addr` names the broker in a lost answer's error.
    pub(super) fn new(addr: &str) -> Self {
        Answers {
            tasks: JoinSet::new(),
            tokens: HashMap::new(),
            addr: addr.to_string(),
        }
    }

    /// Awaits the answer to the request `token` on a task of its own.
    pub(super) fn spawn(&mut self, token: u64, answer: impl Future<Output = Answer> + 'static) {
        let id = self.tasks.spawn_local(answer).id();
        self.tokens.insert(id, token);
    }

    /// Tasks not yet joined.
    pub(super) fn len(&self) -> usize {
        self.tasks.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// The next task to end (`None` if there are none).
    pub(super) async fn next(&mut self) -> Option<Answer> {
        let joined = self.tasks.join_next_with_id().await?;
        Some(self.answer_of(joined))
    }

    /// A task that has already ended, if any.
    pub(super) fn try_next(&mut self) -> Option<Answer> {
        let joined = self.tasks.try_join_next_with_id()?;
        Some(self.answer_of(joined))
    }

    /// Aborts every task left (their requests are failed by the caller).
    pub(super) fn abort_all(&mut self) {
        self.tasks.abort_all();
        self.tokens.clear();
    }

    /// What a task that ended gives: every task gives something, so that its caller
    /// settles each one (its request, and the count of requests in progress).
    fn answer_of(&mut self, joined: Result<(Id, Answer), JoinError>) -> Answer {
        match joined {
            Ok((id, answer)) => {
                self.tokens.remove(&id);
                answer
            }
            Err(e) => {
                // A task not spawned here cannot end here; if one did, the token no
                // request has makes the sink ignore it.
                let token = self.tokens.remove(&e.id()).unwrap_or(NO_REQUEST);
                tracing::error!(error = %e, broker = %self.addr, "a Produce answer task ended without an answer");
                let lost = IoError::AnswerLost {
                    api: ApiKey::Produce,
                    addr: self.addr.clone(),
                    reason: describe(&e),
                };
                (token, Err(lost))
            }
        }
    }
}

/// How a task ended without its answer.
fn describe(e: &JoinError) -> String {
    if e.is_cancelled() {
        return "its task was cancelled".into();
    }
    format!("its task panicked: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on_a_local_set(test: impl Future<Output = ()>) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        tokio::task::LocalSet::new().block_on(&rt, test);
    }

    async fn answered(token: u64) -> Answer {
        let lost = IoError::Closed {
            addr: format!("answer {token}"),
        };
        (token, Err(lost))
    }

    #[test]
    fn an_answer_comes_back_with_its_own_token() {
        on_a_local_set(async {
            let mut answers = Answers::new("127.0.0.1:9");
            answers.spawn(7, answered(7));
            let (token, result) = answers.next().await.expect("an answer");
            assert_eq!(token, 7);
            assert!(matches!(result, Err(IoError::Closed { addr }) if addr == "answer 7"));
            assert!(answers.is_empty() && answers.tokens.is_empty());
        });
    }

    #[test]
    fn a_task_that_panics_still_yields_its_token_with_the_answer_lost() {
        on_a_local_set(async {
            let mut answers = Answers::new("127.0.0.1:9");
            answers.spawn(3, async { panic!("a defect in the answer task") });
            answers.spawn(4, answered(4));
            let mut seen = Vec::new();
            while let Some((token, result)) = answers.next().await {
                seen.push((token, result));
            }
            seen.sort_by_key(|(token, _)| *token);
            assert_eq!(seen.len(), 2, "both requests settle");
            match &seen[0] {
                (3, Err(IoError::AnswerLost { api, addr, reason })) => {
                    assert_eq!(*api, ApiKey::Produce);
                    assert_eq!(addr, "127.0.0.1:9");
                    assert!(reason.contains("panicked"), "{reason}");
                }
                other => panic!("expected request 3's answer lost, got {other:?}"),
            }
            assert!(matches!(&seen[1], (4, Err(IoError::Closed { .. }))));
            assert!(answers.tokens.is_empty(), "no token left behind");
        });
    }

    #[test]
    fn answers_already_in_are_taken_without_waiting() {
        on_a_local_set(async {
            let mut answers = Answers::new("127.0.0.1:9");
            assert!(answers.try_next().is_none());
            answers.spawn(1, answered(1));
            answers.spawn(2, async { panic!("a defect") });
            // The tasks run when this one yields: take what has ended, until both have.
            let mut tokens = Vec::new();
            for _ in 0..100 {
                tokens.extend(std::iter::from_fn(|| answers.try_next()).map(|(t, _)| t));
                if tokens.len() == 2 {
                    break;
                }
                tokio::task::yield_now().await;
            }
            tokens.sort_unstable();
            assert_eq!(tokens, [1, 2]);
            assert!(answers.is_empty());
        });
    }
}
