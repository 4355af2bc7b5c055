//! A registration's VPC peers: the other registration records of its VPC, read only when the
//! VRF's rows cannot decide what a registration writes.
//!
//! The rows a registration shares with its VPC (`vrf_table`'s kind, `vpc_attribution_table`)
//! are functions of the VPC's records, and each registration and removal writes them under the
//! registration lock. So before this registration they already hold the answer for the VPC's
//! other attachments, and a registration needs only to add its own: a tap makes the row tap, a
//! veth leaves a veth row veth; the attribution names the lower ifindex of this attachment and
//! the one the row names (one record read, to learn its ifindex). Reading every record of the
//! VPC made each registration cost the VPC's size (one file per attachment: 6.6 ms of
//! galactic-bgp's 8.4 ms ADD in one VPC of 1 000). The records are still read, once, whenever
//! the rows cannot tell: a row absent (the VPC's first registration, or the datapath's GC
//! removed it), a tap row meeting a veth (is a tap still registered?), an attribution naming an
//! attachment without a record of this VRF, or this attachment itself.

use super::records::*;
use super::*;

/// The records of one registration's VPC, read at most once, on first use.
pub(super) struct Peers<'a> {
    state_dir: &'a Path,
    host_ifname: &'a str,
    records: Option<Vec<AttachmentRecord>>,
}

impl<'a> Peers<'a> {
    /// The peers of `r` (nothing is read yet).
    pub(super) fn of(r: &Registration<'a>) -> Self {
        Self {
            state_dir: r.state_dir,
            host_ifname: r.host_ifname,
            records: None,
        }
    }

    /// Every registration record of the VPC, this one's included ([`vpc_records`]).
    pub(super) fn all(&mut self) -> Result<&[AttachmentRecord], BpfError> {
        let records = match self.records.take() {
            Some(records) => records,
            None => vpc_records(self.state_dir, self.host_ifname)?,
        };
        Ok(self.records.insert(records))
    }

    /// The registration record of `host_ifname` (from the VPC's records when they were read).
    pub(super) fn record(&self, host_ifname: &str) -> Result<Option<AttachmentRecord>, BpfError> {
        match &self.records {
            Some(records) => Ok(records
                .iter()
                .find(|r| r.host_ifname == host_ifname)
                .cloned()),
            None => read_record(self.state_dir, host_ifname),
        }
    }
}
