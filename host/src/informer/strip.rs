//! Cached objects leave out `metadata.managedFields`: the API server's record of which manager
//! owns which field is a fifth to a half of a small object's JSON, and neither the host nor a
//! reconciler reading the cache needs it (a reconciler that does reads the object live with
//! `client.get`). client-go offers the same cut as `TransformStripManagedFields`.

/// `json` without the member whose value is `value` (a slice of `json`, as serde borrows it)
/// and whose key is `"managedFields"`, with the comma that separated it; `None` when `value` is
/// not such a member's value (the text is then kept as it is).
pub(super) fn without_member(json: &str, value: &str, key: &str) -> Option<String> {
    let start = (value.as_ptr() as usize).checked_sub(json.as_ptr() as usize)?;
    let end = start.checked_add(value.len())?;
    if end > json.len() {
        return None;
    }
    let before = json[..start].trim_end().strip_suffix(':')?.trim_end();
    // `"key"`, checked without building the quoted text (this runs for every cached object).
    let unquoted = before.strip_suffix('"')?.strip_suffix(key)?;
    let key_start = unquoted.strip_suffix('"')?.len();
    let after = &json[end..];
    let rest = after.trim_start();
    let (cut_from, cut_to) = if let Some(following) = rest.strip_prefix(',') {
        // `"managedFields": […], "next": …`: the member and the comma after it.
        (key_start, json.len() - following.len())
    } else {
        // The last member: the comma before it, if any.
        let head = json[..key_start].trim_end();
        match head.strip_suffix(',') {
            Some(kept) => (kept.len(), end),
            None => (key_start, end),
        }
    };
    let mut out = String::with_capacity(json.len() - (cut_to - cut_from));
    out.push_str(&json[..cut_from]);
    out.push_str(&json[cut_to..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::value::RawValue;
    use serde_json::{Value, json};

    use super::without_member;

    #[derive(Deserialize)]
    struct Doc<'a> {
        #[serde(borrow)]
        metadata: Meta<'a>,
    }

    #[derive(Deserialize)]
    struct Meta<'a> {
        #[serde(borrow, rename = "managedFields")]
        managed_fields: Option<&'a RawValue>,
    }

    /// `text` with its `metadata.managedFields` cut as the cache cuts them, parsed.
    fn cut(text: &str) -> Value {
        let doc: Doc<'_> = serde_json::from_str(text).expect("decodes");
        let kept = match doc.metadata.managed_fields {
            Some(fields) => without_member(text, fields.get(), "managedFields").expect("cut"),
            None => text.to_owned(),
        };
        serde_json::from_str(&kept).expect("still JSON")
    }

    #[test]
    fn managed_fields_leave_the_text_wherever_they_stand() {
        let fields = r#"[{"manager":"kubectl","operation":"Update","fieldsV1":{"f:data":{}}}]"#;
        for metadata in [
            format!(r#"{{"managedFields":{fields},"name":"a","namespace":"n"}}"#),
            format!(r#"{{"name":"a","managedFields":{fields},"namespace":"n"}}"#),
            format!(r#"{{"name":"a","namespace":"n","managedFields":{fields}}}"#),
            format!(r#"{{ "name" : "a" , "namespace":"n" ,  "managedFields" :  {fields}  }}"#),
            format!(
                "{{\n  \"name\": \"a\",\n  \"managedFields\": {fields},\n  \"namespace\": \"n\"\n}}"
            ),
        ] {
            let text =
                format!(r#"{{"kind":"ConfigMap","metadata":{metadata},"data":{{"k":"v"}}}}"#);
            assert_eq!(
                cut(&text),
                json!({"kind": "ConfigMap", "metadata": {"name": "a", "namespace": "n"},
                       "data": {"k": "v"}}),
                "{text}"
            );
        }
        let only = format!(r#"{{"metadata":{{"managedFields":{fields}}}}}"#);
        assert_eq!(cut(&only), json!({"metadata": {}}));
    }

    #[test]
    fn text_before_the_member_in_any_script_is_cut_on_character_boundaries() {
        let text = r#"{"metadata":{"name":"ä","managedFields":[],"labels":{"é":"ß"}}}"#;
        assert_eq!(
            cut(text),
            json!({"metadata": {"name": "ä", "labels": {"é": "ß"}}})
        );
        let text = r#"{"metadata":{"annotations":{"k":"日本語"},"managedFields":[]}}"#;
        assert_eq!(
            cut(text),
            json!({"metadata": {"annotations": {"k": "日本語"}}})
        );
    }

    #[test]
    fn a_value_that_is_not_the_named_member_is_left_alone() {
        let text = r#"{"metadata":{"name":"managedFields"}}"#;
        let name = &text[text.find(r#""managedFields""#).unwrap()..][..15];
        assert_eq!(without_member(text, name, "managedFields"), None);
        assert_eq!(without_member(text, "elsewhere", "managedFields"), None);
    }
}
