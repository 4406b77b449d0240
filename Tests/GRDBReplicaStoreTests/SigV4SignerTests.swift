import Foundation
import GRDBReplicaStore
import Testing

/// Signatures against AWS's published vectors: the signer must produce
/// their Authorization headers byte for byte.
@Suite struct SigV4SignerTests {
    // MARK: aws-sig-v4-test-suite
    //
    // Source: AWS's Signature Version 4 test suite, as shipped in
    // awslabs/aws-c-auth, tests/aws-signing-test-suite/v4/<case>/
    // (request.txt, context.json, header-canonical-request.txt,
    // header-signature.txt). Every case: credentials AKIDEXAMPLE /
    // wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY, region us-east-1, service
    // "service", 2015-08-30T12:36:00Z; the payload hash is signed, and only
    // post-x-www-form-urlencoded (sign_body: true) sends it as
    // x-amz-content-sha256.

    struct SuiteCase: CustomTestStringConvertible, Sendable {
        var name: String
        var method: String
        var path: String
        var query: [(name: String, value: String)] = []
        var headers: [(name: String, value: String)] = [("Host", "example.amazonaws.com")]
        var body = ""
        var signsBody = false
        var signedHeaders: String
        var signature: String
        var testDescription: String { name }
    }

    static let suiteCredentials = S3Credentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    static let suiteDate = Date(timeIntervalSince1970: 1_440_938_160) // 2015-08-30T12:36:00Z

    static let suiteCases: [SuiteCase] = [
        SuiteCase(name: "get-vanilla", method: "GET", path: "/",
                  signedHeaders: "host;x-amz-date", signature: "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
        SuiteCase(name: "get-vanilla-query-order-key-case", method: "GET", path: "/",
                  query: [("Param2", "value2"), ("Param1", "value1")],
                  signedHeaders: "host;x-amz-date", signature: "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"),
        SuiteCase(name: "get-vanilla-query-unreserved", method: "GET", path: "/",
                  query: [("-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")],
                  signedHeaders: "host;x-amz-date", signature: "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197"),
        SuiteCase(name: "get-utf8", method: "GET", path: "/\u{1234}",
                  signedHeaders: "host;x-amz-date", signature: "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"),
        SuiteCase(name: "post-vanilla", method: "POST", path: "/",
                  signedHeaders: "host;x-amz-date", signature: "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"),
        SuiteCase(name: "post-header-key-sort", method: "POST", path: "/",
                  headers: [("Host", "example.amazonaws.com"), ("My-Header1", "value1")],
                  signedHeaders: "host;my-header1;x-amz-date", signature: "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c"),
        SuiteCase(name: "get-header-value-trim", method: "GET", path: "/",
                  headers: [("Host", "example.amazonaws.com"), ("My-Header1", " value1"), ("My-Header2", " \"a   b   c\"")],
                  signedHeaders: "host;my-header1;my-header2;x-amz-date", signature: "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"),
        SuiteCase(name: "post-x-www-form-urlencoded", method: "POST", path: "/",
                  headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Host", "example.amazonaws.com"), ("Content-Length", "13")],
                  body: "Param1=value1", signsBody: true,
                  signedHeaders: "content-length;content-type;host;x-amz-content-sha256;x-amz-date",
                  signature: "d3875051da38690788ef43de4db0d8f280229d82040bfac253562e56c3f20e0b"),
    ]

    @Test(arguments: suiteCases)
    func signsLikeTheSignatureVersion4TestSuite(_ vector: SuiteCase) {
        let signer = SigV4Signer(credentials: Self.suiteCredentials, region: "us-east-1", service: "service")
        var request = SigV4Request(method: vector.method, path: vector.path, query: vector.query, headers: vector.headers)
        signer.sign(&request, payloadSHA256: suitePayloadHash(vector.body), date: Self.suiteDate, signsContentSHA256Header: vector.signsBody)
        #expect(request.header("Authorization") == "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request,"
            + "SignedHeaders=\(vector.signedHeaders),Signature=\(vector.signature)")
        #expect(request.header("X-Amz-Date") == "20150830T123600Z")
        #expect((request.header("x-amz-content-sha256") != nil) == vector.signsBody)
    }

    /// The canonical request of get-utf8 (header-canonical-request.txt):
    /// the path is encoded once; and the query-order case's sorted query.
    @Test func buildsTheSuiteCanonicalRequests() {
        let signer = SigV4Signer(credentials: Self.suiteCredentials, region: "us-east-1", service: "service")
        var utf8 = SigV4Request(method: "GET", path: "/\u{1234}", headers: [("Host", "example.amazonaws.com")])
        signer.sign(&utf8, payloadSHA256: suitePayloadHash(""), date: Self.suiteDate, signsContentSHA256Header: false)
        utf8.headers.removeAll { $0.name == "authorization" }
        #expect(signer.canonicalRequest(utf8, payloadSHA256: suitePayloadHash("")) == """
            GET
            /%E1%88%B4

            host:example.amazonaws.com
            x-amz-date:20150830T123600Z

            host;x-amz-date
            e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
            """)
        let ordered = SigV4Request(method: "GET", path: "/", query: [("Param2", "value2"), ("Param1", "value1")])
        #expect(ordered.canonicalQuery == "Param1=value1&Param2=value2")
    }

    // MARK: S3 examples
    //
    // Source: Amazon S3 API Reference, "Signature Calculations for the
    // Authorization Header: Transferring Payload in a Single Chunk (AWS
    // Signature Version 4)" (sig-v4-header-based-auth.html), its four
    // examples: access key AKIAIOSFODNN7EXAMPLE, secret
    // wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY, us-east-1, bucket
    // examplebucket, 2013-05-24T00:00:00Z.

    static let s3Credentials = S3Credentials(accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    static let s3Date = Date(timeIntervalSince1970: 1_369_353_600) // 2013-05-24T00:00:00Z
    static let s3Host = (name: "Host", value: "examplebucket.s3.amazonaws.com")

    func signS3(_ request: inout SigV4Request, body: String = "") {
        SigV4Signer(credentials: Self.s3Credentials, region: "us-east-1").sign(&request, payload: Data(body.utf8), date: Self.s3Date)
    }

    func s3Authorization(_ signedHeaders: String, _ signature: String) -> String {
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=\(signedHeaders),Signature=\(signature)"
    }

    @Test func signsTheS3GetObjectExample() {
        var request = SigV4Request(method: "GET", path: "/test.txt", headers: [Self.s3Host, ("Range", "bytes=0-9")])
        signS3(&request)
        #expect(request.header("x-amz-content-sha256") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(request.header("authorization") == s3Authorization(
            "host;range;x-amz-content-sha256;x-amz-date", "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"))
    }

    /// The key `test$file.text` has a reserved character: S3 signs it
    /// encoded once (`test%24file.text`).
    @Test func signsTheS3PutObjectExample() {
        var request = SigV4Request(method: "PUT", path: "/test$file.text", headers: [
            ("Date", "Fri, 24 May 2013 00:00:00 GMT"), Self.s3Host, ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
        ])
        signS3(&request, body: "Welcome to Amazon S3.")
        #expect(request.encodedPath == "/test%24file.text")
        #expect(request.header("x-amz-content-sha256") == "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072")
        #expect(request.header("authorization") == s3Authorization(
            "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class", "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"))
    }

    @Test func signsTheS3GetBucketLifecycleExample() {
        var request = SigV4Request(method: "GET", path: "/", query: [("lifecycle", "")], headers: [Self.s3Host])
        signS3(&request)
        #expect(request.canonicalQuery == "lifecycle=")
        #expect(request.header("authorization") == s3Authorization(
            "host;x-amz-content-sha256;x-amz-date", "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"))
    }

    @Test func signsTheS3ListObjectsExample() {
        var request = SigV4Request(method: "GET", path: "/", query: [("prefix", "J"), ("max-keys", "2")], headers: [Self.s3Host])
        signS3(&request)
        #expect(request.header("authorization") == s3Authorization(
            "host;x-amz-content-sha256;x-amz-date", "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"))
    }

    /// Temporary credentials sign their session token as a header.
    @Test func signsTheSessionTokenOfTemporaryCredentials() {
        let credentials = S3Credentials(accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "secret", sessionToken: "token")
        var request = SigV4Request(method: "GET", path: "/", headers: [Self.s3Host])
        SigV4Signer(credentials: credentials, region: "us-east-1").sign(&request, payload: Data(), date: Self.s3Date)
        #expect(request.header("x-amz-security-token") == "token")
        #expect(request.header("authorization")?.contains("SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token,") == true)
    }

    /// The suite's payload hashes, as its canonical requests give them
    /// (the empty body's, and post-x-www-form-urlencoded's).
    func suitePayloadHash(_ body: String) -> String {
        body.isEmpty
            ? "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
            : "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e"
    }
}
