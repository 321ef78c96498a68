//! Leader epochs for the consumer's fetch position (KIP-320), sans-IO: when a position
//! must be validated against its leader, and what the leader's answer (OffsetForLeaderEpoch's
//! end offset, or a Fetch's `diverging_epoch`) means for it.
//!
//! A fetch position carries the leader epoch of the last batch fetched before it. After
//! a leader change the new leader says where that epoch ends in its log; an end below the
//! position means the log the consumer read from was truncated (an unclean election). As
//! the Java client does (`SubscriptionState.maybeCompleteValidation`): with a reset
//! policy the position moves back to the end offset, the first offset known to diverge;
//! without one the consumer reports the truncation and stays; an answer without an epoch
//! or offset falls back to the reset policy.

/// Where the leader says an epoch ends: the largest epoch it has at or below the one
/// asked about, and the offset where the next epoch begins (or its log end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EpochEnd {
    pub leader_epoch: i32,
    pub end_offset: i64,
}

impl EpochEnd {
    /// Whether the leader knows nothing of the epoch (no such epoch, or no offset).
    fn is_undefined(&self) -> bool {
        self.leader_epoch < 0 || self.end_offset < 0
    }
}

/// What a validation answer means for the position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Validation {
    /// The log holds what was fetched: carry on.
    Valid,
    /// Truncated, and there is a reset policy: fetch from the first offset known to
    /// diverge, with its epoch.
    ResetTo { offset: i64, leader_epoch: i32 },
    /// The leader has no end for the epoch, and there is a reset policy: apply it.
    ApplyResetPolicy,
    /// Truncated and no reset policy: report it (the divergent offset when known).
    Truncated { divergent_offset: Option<i64> },
}

/// What the leader's `end` means for a fetch `position`.
pub(crate) fn judge(position: i64, end: EpochEnd, has_reset_policy: bool) -> Validation {
    if end.is_undefined() {
        return if has_reset_policy {
            Validation::ApplyResetPolicy
        } else {
            Validation::Truncated {
                divergent_offset: None,
            }
        };
    }
    if end.end_offset >= position {
        return Validation::Valid;
    }
    if has_reset_policy {
        Validation::ResetTo {
            offset: end.end_offset,
            leader_epoch: end.leader_epoch,
        }
    } else {
        Validation::Truncated {
            divergent_offset: Some(end.end_offset),
        }
    }
}

/// Whether a position fetched under leader epoch `previous` must be validated before it
/// is fetched from a leader of epoch `current`: the leader changed (a new epoch) and the
/// position knows the epoch of what was fetched before it (`fetch_epoch`).
pub(crate) fn needs_validation(previous: i32, current: i32, fetch_epoch: i32) -> bool {
    previous >= 0 && current >= 0 && current != previous && fetch_epoch >= 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(leader_epoch: i32, end_offset: i64) -> EpochEnd {
        EpochEnd {
            leader_epoch,
            end_offset,
        }
    }

    #[test]
    fn an_end_at_or_past_the_position_is_valid() {
        assert_eq!(judge(100, end(3, 100), false), Validation::Valid);
        assert_eq!(judge(100, end(3, 150), true), Validation::Valid);
    }

    #[test]
    fn an_end_below_the_position_is_a_truncation() {
        assert_eq!(
            judge(100, end(2, 60), true),
            Validation::ResetTo {
                offset: 60,
                leader_epoch: 2
            }
        );
        assert_eq!(
            judge(100, end(2, 60), false),
            Validation::Truncated {
                divergent_offset: Some(60)
            }
        );
    }

    #[test]
    fn an_unknown_epoch_falls_back_to_the_reset_policy() {
        assert_eq!(judge(100, end(-1, -1), true), Validation::ApplyResetPolicy);
        assert_eq!(
            judge(100, end(-1, 40), false),
            Validation::Truncated {
                divergent_offset: None
            }
        );
    }

    #[test]
    fn validation_follows_a_new_epoch_of_a_known_position() {
        assert!(needs_validation(3, 4, 3));
        assert!(!needs_validation(3, 3, 3), "same leader epoch");
        assert!(!needs_validation(-1, 4, 3), "first attachment");
        assert!(!needs_validation(3, 4, -1), "nothing fetched yet");
        assert!(!needs_validation(3, -1, 3), "the metadata has no epoch");
    }
}
