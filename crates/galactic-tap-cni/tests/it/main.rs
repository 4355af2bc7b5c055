//! The tap master as a runtime drives it, on real kernel objects in throwaway namespaces.

mod kata;
mod tap;
