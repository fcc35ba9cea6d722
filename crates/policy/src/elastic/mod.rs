//! Policies that resize elastic jobs: Optimus+Oracle as Pollux's artifact runs it
//! ([`optimus`]) and AFS-L (NSDI'21, [`afs`]). Their shared mechanism is
//! [`crate::mechanisms::elastic`].

pub mod afs;
pub mod optimus;
