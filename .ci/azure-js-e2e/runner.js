// Runs the Azure Mobile Apps JavaScript client's E2E suites (e2etest/) in Node against a server (issue 50): the SDK
// from its sources (no bundle: npm is out of reach), XMLHttpRequest over Node's http as a browser's (no body with GET),
// jQuery's Deferred (deferred.js), the test framework and the suites as the browser app loads them, then the "All
// tests (unattended)" group (ALL=1: every test, the interactive logins too). Prints each test's result, and the
// requests answered 4xx/5xx with DEBUG=1, the logs of failed tests with LOGS=1.
//   node runner.js JS_CLIENT_DIR SERVER_URL      (see ./run)
var vm = require('vm'), fs = require('fs'), http = require('http'), path = require('path');
var root = path.resolve(process.argv[2]);
var url = process.argv[3] || 'http://127.0.0.1:8080';

function XMLHttpRequest() { this.withCredentials = false; this.readyState = 0; this._headers = {}; }
XMLHttpRequest.prototype.open = function (method, target) { this._method = method; this._url = target; this.readyState = 1; };
XMLHttpRequest.prototype.setRequestHeader = function (name, value) { this._headers[name] = value; };
XMLHttpRequest.prototype.getResponseHeader = function (name) {
    var value = this._response && this._response[name.toLowerCase()];
    return value === undefined ? null : Array.isArray(value) ? value.join(', ') : value;
};
XMLHttpRequest.prototype.getAllResponseHeaders = function () {
    var all = this._response || {};
    return Object.keys(all).map(function (k) { return k + ': ' + all[k]; }).join('\r\n');
};
XMLHttpRequest.prototype.abort = function () {};
XMLHttpRequest.prototype.send = function (body) {
    var xhr = this, target = new URL(this._url, url);
    var finish = function (status, text, headers) {
        xhr.status = status; xhr.responseText = text; xhr.response = text; xhr._response = headers;
        xhr.readyState = 4;
        if (xhr.onreadystatechange) { xhr.onreadystatechange(); }
        if (xhr.onload) { xhr.onload(); }
    };
    var request = http.request({
        hostname: target.hostname, port: target.port, path: target.pathname + target.search,
        method: this._method, headers: this._headers
    }, function (response) {
        var chunks = [];
        response.on('data', function (chunk) { chunks.push(chunk); });
        response.on('end', function () {
            xhr.statusText = response.statusMessage;
            if (process.env.DEBUG && response.statusCode >= 400) {
                console.log('    <' + response.statusCode + '> ' + xhr._method + ' ' + xhr._url + ' ' + JSON.stringify(xhr._headers) + ' ' + Buffer.concat(chunks).toString('utf8').slice(0, 300));
            }
            finish(response.statusCode, Buffer.concat(chunks).toString('utf8'), response.headers);
        });
    });
    request.on('error', function (error) { finish(0, '', {}); });
    // A browser's XMLHttpRequest sends no body with GET or HEAD (the SDK's refresh passes its item).
    if (body !== undefined && body !== null && this._method !== 'GET' && this._method !== 'HEAD') { request.write(body); }
    request.end();
};

global.window = global;
global.XMLHttpRequest = XMLHttpRequest;
global.navigator = { userAgent: 'node' };
global.alert = function (text) { console.log('alert: ' + text); };
global.WindowsAzure = require(path.join(root, 'sdk/src/index.js'));
global.$ = global.jQuery = require(path.join(__dirname, 'deferred.js'));

var scripts = [
    'misc/target/browser/Promises.js', 'misc/target/browser/platformSpecificFunctions.js',
    'misc/testframework/testFramework.js', 'misc/testframework/storageFramework.js',
    'tests/shared/roundTripTests.js', 'tests/shared/mobileServiceTable.Functional.js',
    'tests/shared/queryTestData.js', 'tests/shared/queryTests.js', 'tests/shared/updateDeleteTests.js',
    'tests/shared/loginTests.js', 'tests/shared/miscTests.js', 'tests/shared/apiTests.js',
    'tests/shared/allTests.js'
];
scripts.forEach(function (script) {
    var file = path.join(root, 'e2etest', script);
    vm.runInThisContext(fs.readFileSync(file, 'utf8').replace(/^\uFEFF/, ''), { filename: file });
});

var groupName = process.env.ALL ? zumo.AllTestsGroupName : zumo.AllTestsUnattendedGroupName;
var group = zumo.testGroups.filter(function (g) { return g.name === groupName; })[0];
if (!zumo.initializeClient(url)) { console.log('cannot initialize the client for ' + url); process.exit(2); }
var started = Date.now();
group.runTests(function () {}, function (test, index) {
    var status = test.status === zumo.TSPassed ? 'PASS' : test.status === zumo.TSFailed ? 'FAIL' : test.status === zumo.TSSkipped ? 'SKIP' : '?';
    console.log(status + ' ' + (index + 1) + '. ' + test.name);
    if (status === 'FAIL' && process.env.LOGS) { console.log('    ' + test.getLogs().split('\n').slice(-12).join('\n    ')); }
}, function (passed, failed) {
    var skipped = group.tests.filter(function (t) { return t.status === zumo.TSSkipped; }).length;
    console.log('tests: ' + group.tests.length + ', passed ' + passed + ', failed ' + failed + ', skipped ' + skipped +
        ' (' + ((Date.now() - started) / 1000).toFixed(1) + ' s)');
    process.exit(failed === 0 ? 0 : 1);
});
