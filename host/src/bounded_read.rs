//! Reading a file a configuration or manifest names, within a bound: at most a given size,
//! whatever the file claims, so a mistaken or hostile path (`/dev/zero`, a huge file) costs
//! neither memory nor much time. (A pipe nobody writes blocks the read like a hung filesystem;
//! the host's shutdown does not wait for such a read.)

use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// The most bytes of a plugin module file (as an OCI registry's module may be).
pub const MAX_MODULE_BYTES: u64 = 64 << 20;

/// The most bytes of a manifest file (a `plugin.yaml` or a `ReconcilerPlugin` file).
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// The bytes of the file at `path` (a `what`, for messages), refused when it is a directory or
/// holds more than `max` bytes (a device such as `/dev/zero` is refused after `max + 1`).
///
/// # Errors
/// The file's own I/O error, or `InvalidInput` naming what is wrong and the fix.
pub fn read(path: &Path, max: u64, what: &str) -> io::Result<Vec<u8>> {
    let metadata = std::fs::metadata(path)?;
    if metadata.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("it is a directory; name the {what} file itself"),
        ));
    }
    let too_large = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "it is larger than the {} MiB a {what} may be; check that the path names the {what}",
                max >> 20
            ),
        )
    };
    if metadata.is_file() && metadata.len() > max {
        return Err(too_large());
    }
    let capacity = usize::try_from(metadata.len().min(max)).unwrap_or(0);
    let mut bytes = Vec::with_capacity(capacity);
    std::fs::File::open(path)?
        .take(max + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_large());
    }
    Ok(bytes)
}

/// [`read`] as UTF-8 text.
///
/// # Errors
/// As [`read`], and `InvalidData` when the file is not UTF-8.
pub fn read_to_string(path: &Path, max: u64, what: &str) -> io::Result<String> {
    String::from_utf8(read(path, max, what)?).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("it is not UTF-8 text, as a {what} must be"),
        )
    })
}

/// [`read`] on a blocking thread.
///
/// # Errors
/// As [`read`].
pub async fn read_async(path: &Path, max: u64, what: &'static str) -> io::Result<Vec<u8>> {
    let path: PathBuf = path.to_owned();
    tokio::task::spawn_blocking(move || read(&path, max, what))
        .await
        .unwrap_or_else(|error| Err(io::Error::other(error)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_and_files_over_the_bound_are_refused_and_the_rest_read_whole() {
        let error = read(Path::new("/dev/zero"), 1 << 20, "module").expect_err("endless");
        assert!(
            error.to_string().contains("larger than the 1 MiB a module"),
            "{error}"
        );

        let dir = std::env::temp_dir().join(format!("bounded-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("f");
        std::fs::write(&file, vec![b'a'; 2048]).expect("written");
        assert_eq!(
            read(&file, 2048, "module").expect("at the bound").len(),
            2048
        );
        let error = read(&file, 2047, "module").expect_err("over the bound");
        assert!(error.to_string().contains("larger than"), "{error}");
        let error = read(&dir, 2048, "manifest").expect_err("a directory");
        assert!(
            error.to_string().contains("name the manifest file"),
            "{error}"
        );
        std::fs::write(&file, [0xff, 0xfe]).expect("written");
        assert!(read_to_string(&file, 16, "manifest").is_err());
        std::fs::remove_dir_all(&dir).expect("removed");
    }
}
