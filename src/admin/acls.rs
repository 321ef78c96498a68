//! Access control lists (KIP-140): create, describe and delete ACL bindings with
//! filters (CreateAcls, DescribeAcls, DeleteAcls). A binding is checked before it is
//! sent — a principal must be `Type:name` (`User:alice`), a binding names one resource
//! type, pattern, operation and permission, never a wildcard filter value — so a bad
//! one is an error naming it rather than the broker's generic INVALID_REQUEST. A broker
//! without an authorizer answers SECURITY_DISABLED. Requests go to any broker (which
//! forwards to the controller under KRaft).

use std::str::FromStr;

use super::{Admin, Route, check};
use crate::error::{Error, Result};
use crate::protocol::messages::{
    ApiKey, CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest, create_acls::AclCreation,
    delete_acls::DeleteAclsFilter,
};

/// Declares a wire enum: its variants with codes and the names the Java tools accept.
macro_rules! acl_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $code:literal, $text:literal;)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)*
        }

        impl $name {
            /// Its code on the wire.
            pub fn code(self) -> i8 {
                match self { $($name::$variant => $code,)* }
            }

            /// The value for a code, if it is a known one.
            pub fn from_code(code: i8) -> Option<Self> {
                match code { $($code => Some($name::$variant),)* _ => None }
            }

            /// Its name, as the Java tools print it.
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text,)* }
            }

            fn from_wire(code: i8, what: &str) -> Result<Self> {
                Self::from_code(code).ok_or_else(|| {
                    Error::Malformed(format!("{what}: unknown {} code {code}", stringify!($name)))
                })
            }
        }

        impl FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                let wanted: String = s.chars().filter(|c| *c != '-' && *c != '_').collect();
                [$($name::$variant,)*]
                    .into_iter()
                    .find(|v| v.name().replace('_', "").eq_ignore_ascii_case(&wanted))
                    .ok_or_else(|| Error::InvalidArgument(format!(
                        "{s:?} is not a {} (one of {})",
                        stringify!($name),
                        [$($text,)*].join(", ")
                    )))
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

acl_enum!(
    /// What kind of resource an ACL protects (`ResourceType`).
    AclResourceType {
        /// Any type (filters only).
        Any = 1, "ANY";
        /// A topic.
        Topic = 2, "TOPIC";
        /// A consumer group.
        Group = 3, "GROUP";
        /// The cluster (name `kafka-cluster`).
        Cluster = 4, "CLUSTER";
        /// A transactional id.
        TransactionalId = 5, "TRANSACTIONAL_ID";
        /// A delegation token.
        DelegationToken = 6, "DELEGATION_TOKEN";
        /// A user (for token creation).
        User = 7, "USER";
    }
);

acl_enum!(
    /// How a resource name matches (`PatternType`, KIP-290).
    PatternType {
        /// Any pattern (filters only).
        Any = 1, "ANY";
        /// Every binding that matches the name, literal, prefixed or wildcard (filters only).
        Match = 2, "MATCH";
        /// The name exactly (`*` is every resource).
        Literal = 3, "LITERAL";
        /// Every name that starts with it.
        Prefixed = 4, "PREFIXED";
    }
);

acl_enum!(
    /// The operation an ACL allows or denies (`AclOperation`).
    AclOperation {
        /// Any operation (filters only).
        Any = 1, "ANY";
        /// Every operation.
        All = 2, "ALL";
        /// Read.
        Read = 3, "READ";
        /// Write.
        Write = 4, "WRITE";
        /// Create.
        Create = 5, "CREATE";
        /// Delete.
        Delete = 6, "DELETE";
        /// Alter.
        Alter = 7, "ALTER";
        /// Describe.
        Describe = 8, "DESCRIBE";
        /// Inter-broker actions.
        ClusterAction = 9, "CLUSTER_ACTION";
        /// Describe configs.
        DescribeConfigs = 10, "DESCRIBE_CONFIGS";
        /// Alter configs.
        AlterConfigs = 11, "ALTER_CONFIGS";
        /// Idempotent produce.
        IdempotentWrite = 12, "IDEMPOTENT_WRITE";
        /// Create delegation tokens.
        CreateTokens = 13, "CREATE_TOKENS";
        /// Describe delegation tokens.
        DescribeTokens = 14, "DESCRIBE_TOKENS";
        /// Two-phase commit (KIP-939).
        TwoPhaseCommit = 15, "TWO_PHASE_COMMIT";
    }
);

acl_enum!(
    /// Whether an ACL allows or denies (`AclPermissionType`).
    AclPermission {
        /// Either (filters only).
        Any = 1, "ANY";
        /// Denies.
        Deny = 2, "DENY";
        /// Allows.
        Allow = 3, "ALLOW";
    }
);

/// One ACL: `principal` from `host` may (or may not) do `operation` on the resources
/// `resource_name` and `pattern_type` match.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclBinding {
    /// The resource type.
    pub resource_type: AclResourceType,
    /// The resource name (`*` with a literal pattern: every resource of the type).
    pub resource_name: String,
    /// How the name matches.
    pub pattern_type: PatternType,
    /// `Type:name`, e.g. `User:alice` (`User:*` is every user).
    pub principal: String,
    /// The client host, `*` for any.
    pub host: String,
    /// The operation.
    pub operation: AclOperation,
    /// Allow or deny.
    pub permission: AclPermission,
}

impl AclBinding {
    /// `principal` may do `operation` on the literal resource `name`, from any host.
    pub fn allow(
        resource_type: AclResourceType,
        name: impl Into<String>,
        principal: impl Into<String>,
        operation: AclOperation,
    ) -> Self {
        AclBinding {
            resource_type,
            resource_name: name.into(),
            pattern_type: PatternType::Literal,
            principal: principal.into(),
            host: "*".into(),
            operation,
            permission: AclPermission::Allow,
        }
    }

    /// The filter that matches exactly this binding.
    pub fn to_filter(&self) -> AclBindingFilter {
        AclBindingFilter {
            resource_type: self.resource_type,
            resource_name: Some(self.resource_name.clone()),
            pattern_type: self.pattern_type,
            principal: Some(self.principal.clone()),
            host: Some(self.host.clone()),
            operation: self.operation,
            permission: self.permission,
        }
    }

    /// Refuses what can't be a binding, naming it.
    pub fn validate(&self) -> Result<()> {
        let bad = |why: String| Err(Error::InvalidArgument(format!("ACL {self}: {why}")));
        if self.resource_type == AclResourceType::Any {
            return bad("a binding needs a resource type, not ANY".into());
        }
        if matches!(self.pattern_type, PatternType::Any | PatternType::Match) {
            return bad(format!(
                "a binding's pattern is LITERAL or PREFIXED, not {}",
                self.pattern_type
            ));
        }
        if self.operation == AclOperation::Any {
            return bad("a binding needs an operation, not ANY".into());
        }
        if self.permission == AclPermission::Any {
            return bad("a binding is ALLOW or DENY, not ANY".into());
        }
        if self.resource_name.is_empty() {
            return bad("the resource name is empty".into());
        }
        if self.host.is_empty() {
            return bad("the host is empty (use * for any host)".into());
        }
        check_principal(&self.principal)
    }
}

impl std::fmt::Display for AclBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {}:{} {} {} from {}",
            self.permission,
            self.principal,
            self.resource_type,
            self.resource_name,
            self.pattern_type,
            self.operation,
            self.host
        )
    }
}

/// `Type:name` with both parts present, as Kafka's `SecurityUtils.parseKafkaPrincipal`
/// requires.
fn check_principal(principal: &str) -> Result<()> {
    match principal.split_once(':') {
        Some((kind, name)) if !kind.is_empty() && !name.is_empty() => Ok(()),
        _ => Err(Error::InvalidArgument(format!(
            "principal {principal:?} has no type: write TYPE:NAME, e.g. User:{}",
            principal.trim_start_matches(':')
        ))),
    }
}

/// Which ACLs a describe or delete matches; `None` and the `Any` values match
/// everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclBindingFilter {
    /// The resource type, or `Any`.
    pub resource_type: AclResourceType,
    /// The resource name, or `None` for any.
    pub resource_name: Option<String>,
    /// The pattern type: `Any`, `Match` (bindings that apply to the name) or one.
    pub pattern_type: PatternType,
    /// The principal, or `None` for any.
    pub principal: Option<String>,
    /// The host, or `None` for any.
    pub host: Option<String>,
    /// The operation, or `Any`.
    pub operation: AclOperation,
    /// The permission, or `Any`.
    pub permission: AclPermission,
}

impl AclBindingFilter {
    /// Matches every ACL.
    pub fn any() -> Self {
        AclBindingFilter {
            resource_type: AclResourceType::Any,
            resource_name: None,
            pattern_type: PatternType::Any,
            principal: None,
            host: None,
            operation: AclOperation::Any,
            permission: AclPermission::Any,
        }
    }

    fn validate(&self) -> Result<()> {
        match &self.principal {
            Some(p) => check_principal(p),
            None => Ok(()),
        }
    }
}

impl Admin {
    /// Creates `acls`; each is checked first, and the first the broker refuses is an
    /// error naming it.
    pub async fn create_acls(&self, acls: &[AclBinding]) -> Result<()> {
        for acl in acls {
            acl.validate()?;
        }
        let request = CreateAclsRequest::default().with_creations(
            acls.iter()
                .map(|a| {
                    AclCreation::default()
                        .with_resource_type(a.resource_type.code())
                        .with_resource_name(a.resource_name.clone())
                        .with_resource_pattern_type(a.pattern_type.code())
                        .with_principal(a.principal.clone())
                        .with_host(a.host.clone())
                        .with_operation(a.operation.code())
                        .with_permission_type(a.permission.code())
                })
                .collect(),
        );
        self.run(Route::Any, |broker| {
            let request = request.clone();
            async move {
                let response = broker.send(request).await?;
                if response.results.len() != acls.len() {
                    return Err(Error::Malformed(format!(
                        "CreateAcls answered {} result(s) for {} ACL(s)",
                        response.results.len(),
                        acls.len()
                    )));
                }
                for (acl, r) in acls.iter().zip(response.results) {
                    check(
                        ApiKey::CreateAcls,
                        &format!("ACL {acl}"),
                        r.error_code,
                        r.error_message,
                    )?;
                }
                Ok(())
            }
        })
        .await
    }

    /// The ACLs `filter` matches, sorted.
    pub async fn describe_acls(&self, filter: &AclBindingFilter) -> Result<Vec<AclBinding>> {
        filter.validate()?;
        let request = DescribeAclsRequest::default()
            .with_resource_type_filter(filter.resource_type.code())
            .with_resource_name_filter(filter.resource_name.clone())
            .with_pattern_type_filter(filter.pattern_type.code())
            .with_principal_filter(filter.principal.clone())
            .with_host_filter(filter.host.clone())
            .with_operation(filter.operation.code())
            .with_permission_type(filter.permission.code());
        self.run(Route::Any, |broker| {
            let request = request.clone();
            async move {
                let response = broker.send(request).await?;
                check(
                    ApiKey::DescribeAcls,
                    "ACLs",
                    response.error_code,
                    response.error_message,
                )?;
                let mut out = Vec::new();
                for r in response.resources {
                    let what = format!("DescribeAcls resource {}", r.resource_name);
                    let resource_type = AclResourceType::from_wire(r.resource_type, &what)?;
                    let pattern_type = PatternType::from_wire(r.pattern_type, &what)?;
                    for a in r.acls {
                        out.push(AclBinding {
                            resource_type,
                            resource_name: r.resource_name.clone(),
                            pattern_type,
                            principal: a.principal,
                            host: a.host,
                            operation: AclOperation::from_wire(a.operation, &what)?,
                            permission: AclPermission::from_wire(a.permission_type, &what)?,
                        });
                    }
                }
                out.sort();
                Ok(out)
            }
        })
        .await
    }

    /// Deletes the ACLs each filter matches and answers them, sorted.
    pub async fn delete_acls(&self, filters: &[AclBindingFilter]) -> Result<Vec<AclBinding>> {
        for f in filters {
            f.validate()?;
        }
        let request = DeleteAclsRequest::default().with_filters(
            filters
                .iter()
                .map(|f| {
                    DeleteAclsFilter::default()
                        .with_resource_type_filter(f.resource_type.code())
                        .with_resource_name_filter(f.resource_name.clone())
                        .with_pattern_type_filter(f.pattern_type.code())
                        .with_principal_filter(f.principal.clone())
                        .with_host_filter(f.host.clone())
                        .with_operation(f.operation.code())
                        .with_permission_type(f.permission.code())
                })
                .collect(),
        );
        self.run(Route::Any, |broker| {
            let request = request.clone();
            async move {
                let response = broker.send(request).await?;
                let mut out = Vec::new();
                for r in response.filter_results {
                    check(ApiKey::DeleteAcls, "ACLs", r.error_code, r.error_message)?;
                    for m in r.matching_acls {
                        let what = format!("DeleteAcls match {}", m.resource_name);
                        let acl = AclBinding {
                            resource_type: AclResourceType::from_wire(m.resource_type, &what)?,
                            pattern_type: PatternType::from_wire(m.pattern_type, &what)?,
                            operation: AclOperation::from_wire(m.operation, &what)?,
                            permission: AclPermission::from_wire(m.permission_type, &what)?,
                            resource_name: m.resource_name,
                            principal: m.principal,
                            host: m.host,
                        };
                        check(
                            ApiKey::DeleteAcls,
                            &format!("ACL {acl}"),
                            m.error_code,
                            m.error_message,
                        )?;
                        out.push(acl);
                    }
                }
                out.sort();
                Ok(out)
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_like_the_java_tools() {
        assert_eq!(
            "transactional-id".parse::<AclResourceType>().unwrap(),
            AclResourceType::TransactionalId
        );
        assert_eq!("Read".parse::<AclOperation>().unwrap(), AclOperation::Read);
        assert_eq!(
            "describe_configs".parse::<AclOperation>().unwrap(),
            AclOperation::DescribeConfigs
        );
        assert_eq!(
            "prefixed".parse::<PatternType>().unwrap(),
            PatternType::Prefixed
        );
        let e = "reed".parse::<AclOperation>().unwrap_err().to_string();
        assert!(e.contains("\"reed\"") && e.contains("READ"), "{e}");
        assert_eq!(AclOperation::from_code(99), None);
    }

    #[test]
    fn bindings_are_checked_before_sending() {
        let ok = AclBinding::allow(
            AclResourceType::Topic,
            "t",
            "User:alice",
            AclOperation::Read,
        );
        ok.validate().unwrap();
        for principal in ["alice", ":alice", "User:", ""] {
            let mut b = ok.clone();
            b.principal = principal.into();
            let e = b.validate().unwrap_err().to_string();
            assert!(e.contains("has no type"), "{principal}: {e}");
        }
        let mut b = ok.clone();
        b.operation = AclOperation::Any;
        assert!(b.validate().is_err());
        let mut b = ok.clone();
        b.pattern_type = PatternType::Match;
        assert!(b.validate().is_err());
        let mut f = AclBindingFilter::any();
        f.validate().unwrap();
        f.principal = Some("bob".into());
        assert!(f.validate().is_err());
    }
}
