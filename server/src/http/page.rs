//! The status page (`/`): one HTML file with its styles and script inline (no external scripts,
//! styles or fonts), embedded in the binary. It polls `/api/status` (the JSON of
//! `sluice::lineage::status`) and `/lineage.svg` (`sluice::lineage::to_svg`) every 2 s.

/// The page, as served.
pub const STATUS_PAGE: &str = include_str!("status.html");

#[cfg(test)]
mod tests {
    use super::STATUS_PAGE;

    #[test]
    fn the_page_loads_nothing_from_elsewhere() {
        for outside in ["http://", "https://", "//fonts", "<link", "src=", "@import", "url("] {
            assert!(!STATUS_PAGE.contains(outside), "the status page names {outside}");
        }
        for polled in ["\"/api/status\"", "\"/lineage.svg\"", "id=\"graph\"", "id=\"updated\""] {
            assert!(STATUS_PAGE.contains(polled), "{polled}");
        }
    }
}
